package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartgen"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/realcharts"
)

// TestRealChartsParity installs every chart of the real-chart corpus
// (test/realcharts, docs/charts.md) under upstream helm-controller, under
// ours in default mode and under ours with waitStrategy afterHooks, each
// time in a fresh namespace, then runs a no-op reconcile and an
// uninstall. After every step it compares what users read of the
// HelmRelease, Helm storage and the cluster; a difference not listed in
// realChartsExpected fails the test with a table. Charts run in parallel;
// one chart's three runs follow each other, since charts own
// cluster-scoped objects of fixed names (CRDs, webhooks, ClusterRoles).
func TestRealChartsParity(t *testing.T) {
	t.Parallel()
	charts, err := realcharts.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	seen := &seenExpectations{used: map[expectKey]bool{}, ran: map[string]bool{}, outcomes: realcharts.Outcomes{}}
	t.Cleanup(func() {
		seen.checkUnused(t)
		seen.writeOutcomes(t)
	})
	// Each chart in a subtest of its own goroutine, a few at a time: with
	// t.Parallel, -parallel (GOMAXPROCS, 2 on the CI machine) would run
	// two charts at once, and a run mostly waits on the cluster.
	var wg sync.WaitGroup
	slots := make(chan struct{}, realChartsConcurrency)
	for _, c := range charts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(c.Name, func(t *testing.T) { parityRealChart(t, c, bin, seen) })
		}()
	}
	wg.Wait()
}

// realChartsConcurrency is how many charts run at once.
const realChartsConcurrency = 6

// parityRealChart runs chart c under upstream, then under ours in each
// mode, and compares each of ours with upstream.
func parityRealChart(t *testing.T, c realcharts.Chart, bin string, seen *seenExpectations) {
	dir, err := c.Dir(bin)
	if err != nil {
		t.Skip(err.Error())
	}
	ref, err := env.Charts.AddChart(dir, chartserver.WithVersion("0.0.0-corpus."+c.Name))
	if err != nil {
		t.Fatalf("publishing %s: %v", c.Name, err)
	}
	upstream := runRealChart(t, c, dir, ref, realModeUpstream)
	seen.record(c.Name, upstream)
	for _, mode := range []realMode{realModeDefault, realModeAfterHooks} {
		ours := runRealChart(t, c, dir, ref, mode)
		seen.record(c.Name, ours)
		if rows := seen.compare(c.Name, mode, upstream, ours); len(rows) > 0 {
			t.Errorf("%s: ours (%s) differs from upstream where no difference is listed:\n%s", c.Name, mode, formatRows(rows))
		}
	}
}

// realMode is one way of running a chart.
type realMode string

const (
	realModeUpstream   realMode = "upstream"
	realModeDefault    realMode = "default"
	realModeAfterHooks realMode = "afterHooks"
)

// realSteps are the steps every chart goes through.
var realSteps = []string{"install", "no-op reconcile", "uninstall"}

// realRun is what one run observed after each step, in realSteps order.
type realRun struct {
	mode  realMode
	steps []realSnapshot
	// names are the steps' names when they are not realSteps (a
	// generated scenario's).
	names []string
	// install is how long the install step took to settle.
	install time.Duration
}

// realSnapshot is a normalised observation: the side's namespace reads
// <ns>, and nothing holds a time, uid or duration.
type realSnapshot struct {
	parity paritySnapshot
	// history: version, status, chart version and values digest of each
	// status.history entry.
	history []string
	// objects are the live objects of the latest release, hooks the
	// hooks Helm storage recorded with the phase of their last run,
	// leftovers what is left of the release after uninstall.
	objects, hooks, leftovers []string
	events                    []string
}

func runRealChart(t *testing.T, c realcharts.Chart, dir string, ref chartserver.ChartRef, mode realMode) realRun {
	t.Helper()
	side, repo := startParitySide(t, mode, "corpus")
	bindClaims(t, side.ns, c.Sim.Claims)
	side.hr = framework.Sharded(realChartRelease(c, side.ns, repo, ref, mode), side.ctl)
	run := realRun{mode: mode}
	start := time.Now()
	env.Create(t, side.hr)
	side.settle(t, parityStep{name: "install", settled: parityInstallSettled})
	run.install = time.Since(start)
	run.steps = append(run.steps, side.realSnapshot(t))

	token := env.RequestReconcile(t, side.hr)
	side.settle(t, parityStep{name: "no-op reconcile", settled: parityHandled(token)})
	run.steps = append(run.steps, side.realSnapshot(t))

	run.steps = append(run.steps, side.uninstall(t, dir))
	t.Logf("%s (%s): install settled in %s", c.Name, mode, run.install.Round(time.Second))
	return run
}

// startParitySide starts, for a fresh namespace, a controller of its own
// (upstream's binary for realModeUpstream, ours otherwise) on a shard
// named after shard, and returns the side with the name of the
// namespace's HelmRepository.
func startParitySide(t *testing.T, mode realMode, shard string) (*paritySide, string) {
	t.Helper()
	side := &paritySide{name: string(mode), ns: env.Namespace(t)}
	if mode == realModeUpstream {
		side.binary = framework.UpstreamBinary(t)
	}
	repo := env.HelmRepository(t, side.ns)
	side.ctl = env.StartShard(t, side.ns, framework.ControllerOptions{Shard: shard + "-" + rand.String(8), Binary: side.binary})
	framework.EnsureRunning(t, side.ctl)
	return side, repo.Name
}

// uninstall deletes the HelmRelease, waits until it is gone and
// snapshots what is left of what the chart in dir installed.
func (s *paritySide) uninstall(t *testing.T, dir string) realSnapshot {
	t.Helper()
	installed := s.releaseObjects(t, dir)
	if err := env.Client.Delete(context.Background(), s.hr); err != nil {
		t.Fatalf("%s: deleting the HelmRelease: %v", s.name, err)
	}
	env.Eventually(t, 3*time.Minute, fmt.Sprintf("%s: %s uninstalled", s.name, s.hr.Name), func(ctx context.Context) error {
		framework.MustRun(t, s.ctl)
		return env.Gone(ctx, s.hr)
	})
	return s.uninstalledSnapshot(t, installed)
}

// realChartRelease is the HelmRelease of chart c in ns for mode.
func realChartRelease(c realcharts.Chart, ns, repo string, ref chartserver.ChartRef, mode realMode) *v2.HelmRelease {
	hr := framework.Release(ns, c.Name, repo, ref.Name, ref.Version, "")
	if len(c.Sim.Values) > 0 {
		hr.Spec.Values = framework.JSONFrom(c.Sim.Values)
	}
	if c.Sim.Timeout > 0 {
		hr.Spec.Timeout = &metav1.Duration{Duration: c.Sim.Timeout}
	}
	if mode == realModeAfterHooks {
		hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
		hr.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	}
	return hr
}

// parityInstallSettled: the install of the current spec ended, Ready or
// stalled.
func parityInstallSettled(hr *v2.HelmRelease) error {
	if parityReady(hr) == nil || conditions.IsStalled(hr) {
		return nil
	}
	return fmt.Errorf("install not settled: %s", framework.Conditions(hr))
}

// parityHandled: the controller acknowledged the reconcile request token.
func parityHandled(token string) func(hr *v2.HelmRelease) error {
	return func(hr *v2.HelmRelease) error {
		if hr.Status.LastHandledReconcileAt != token {
			return fmt.Errorf("request %s not handled yet: %s", token, framework.Conditions(hr))
		}
		return nil
	}
}

// bindClaims makes, for each claim the chart's StatefulSets ask for, a
// volume bound to it in advance: the test cluster has no provisioner.
func bindClaims(t *testing.T, ns string, claims []string) {
	t.Helper()
	for _, claim := range claims {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Ti")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: "/simulated/" + ns + "/" + claim}},
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim},
			},
		}
		env.Create(t, pv)
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	}
}

// realSnapshot reads the HelmRelease, Helm storage and the release's live
// objects.
func (s *paritySide) realSnapshot(t *testing.T) realSnapshot {
	t.Helper()
	snap := realSnapshot{parity: s.snapshot(t), events: s.eventReasons(t)}
	// An entry's digest hashes the release with its namespace and
	// manifest, which name the side's namespace: it cannot match across
	// sides, so only the values' digest is compared.
	for _, h := range s.hr.Status.History {
		snap.history = append(snap.history, fmt.Sprintf("v%d %s %s@%s config %s",
			h.Version, h.Status, h.ChartName, h.ChartVersion, h.ConfigDigest))
	}
	stored := env.Storage(t, s.ns, s.hr.Name)
	if len(stored) == 0 {
		return snap
	}
	latest := stored[len(stored)-1].Release
	for _, h := range latest.Hooks {
		phase := "never run"
		if h.LastRun.Phase != "" {
			phase = string(h.LastRun.Phase)
		}
		snap.hooks = append(snap.hooks, fmt.Sprintf("%s/%s %v: %s", h.Kind, randomSuffix.ReplaceAllString(h.Name, "-<random>"), h.Events, phase))
	}
	sort.Strings(snap.hooks)
	for _, obj := range manifestObjects(t, s.ns, latest.Manifest) {
		if exists(t, obj) {
			snap.objects = append(snap.objects, s.normalise(objectName(obj)))
		}
	}
	sort.Strings(snap.objects)
	return snap
}

// releaseObjects is everything an install of c made: the latest release's
// objects and hooks, and the CRDs of the chart's crds/ directories.
func (s *paritySide) releaseObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	if stored := env.Storage(t, s.ns, s.hr.Name); len(stored) > 0 {
		latest := stored[len(stored)-1].Release
		objs = manifestObjects(t, s.ns, latest.Manifest)
		for _, h := range latest.Hooks {
			objs = append(objs, manifestObjects(t, s.ns, h.Manifest)...)
		}
	}
	crds, err := realcharts.CRDNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range crds {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(name)
		objs = append(objs, crd)
	}
	return objs
}

// uninstalledSnapshot records what is left of the release's objects and
// storage once its HelmRelease is gone, then deletes the cluster-scoped
// leftovers so that the next run starts from the same cluster.
func (s *paritySide) uninstalledSnapshot(t *testing.T, installed []*unstructured.Unstructured) realSnapshot {
	t.Helper()
	snap := realSnapshot{events: s.settledEvents(t)}
	for _, r := range env.Storage(t, s.ns, s.hr.Name) {
		snap.parity.storage = append(snap.parity.storage, fmt.Sprintf("v%d %s", r.Release.Version, r.Release.Info.Status))
	}
	seen := map[string]bool{}
	for _, obj := range installed {
		name := objectName(obj)
		if seen[name] || !exists(t, obj) {
			continue
		}
		seen[name] = true
		snap.leftovers = append(snap.leftovers, s.normalise(name))
		if obj.GetNamespace() == "" && !namespaced(t, obj) {
			deleteAndWait(t, obj)
		}
	}
	sort.Strings(snap.leftovers)
	return snap
}

// randomSuffix is the tail of a name that a template draws at random
// (test Pods named with randAlphaNum 5): it differs on every render. A
// fixed name's last five characters are normalised alike on both sides.
var randomSuffix = regexp.MustCompile(`-[a-z0-9]{5}$`)

// settledEvents are the HelmRelease's event reasons once they stayed the
// same for a second: the uninstall's last events may still be on their
// way when the HelmRelease is gone.
func (s *paritySide) settledEvents(t *testing.T) []string {
	t.Helper()
	events := s.eventReasons(t)
	env.Eventually(t, 30*time.Second, s.name+": events settled", func(ctx context.Context) error {
		time.Sleep(time.Second)
		next := s.eventReasons(t)
		if !slices.Equal(next, events) {
			events = next
			return fmt.Errorf("events still arriving: %v", next)
		}
		return nil
	})
	return events
}

func (s *paritySide) normalise(text string) string {
	return strings.ReplaceAll(text, s.ns, "<ns>")
}

// manifestObjects splits a release manifest into objects (only their
// type and name are set); an object of a namespaced kind without a
// namespace is in ns, the release's, as Helm puts it.
func manifestObjects(t *testing.T, ns, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range releaseutil.SplitManifests(manifest) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("reading a release manifest: %v", err)
		}
		if obj.GetKind() == "" {
			continue
		}
		head := &unstructured.Unstructured{}
		head.SetAPIVersion(obj.GetAPIVersion())
		head.SetKind(obj.GetKind())
		head.SetNamespace(obj.GetNamespace())
		head.SetName(obj.GetName())
		if head.GetNamespace() == "" && namespaced(t, head) {
			head.SetNamespace(ns)
		}
		out = append(out, head)
	}
	return out
}

// exists tells whether obj is on the cluster; an object of a kind the
// API server does not serve (its CRD is gone) is not.
func exists(t *testing.T, obj *unstructured.Unstructured) bool {
	t.Helper()
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(obj.GroupVersionKind())
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), probe)
	switch {
	case err == nil:
		return true
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		return false
	default:
		t.Fatalf("reading %s: %v", objectName(obj), err)
		return false
	}
}

// namespaced tells whether obj's kind is namespaced; a kind the API
// server does not serve counts as cluster-scoped.
func namespaced(t *testing.T, obj *unstructured.Unstructured) bool {
	t.Helper()
	ok, err := env.Client.IsObjectNamespaced(obj)
	if err != nil {
		return false
	}
	return ok
}

func deleteAndWait(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(obj.GroupVersionKind())
	probe.SetName(obj.GetName())
	if err := env.Client.Delete(context.Background(), probe); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting the leftover %s: %v", objectName(obj), err)
	}
	env.Eventually(t, time.Minute, "the leftover "+objectName(obj)+" deleted", func(ctx context.Context) error {
		return env.Gone(ctx, probe)
	})
}

func objectName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// realField is one compared field of a snapshot.
type realField struct{ name, value string }

func (s realSnapshot) fields() []realField {
	out := make([]realField, 0, 16)
	for _, typ := range parityConditions {
		out = append(out, realField{typ, s.parity.conditions[typ]})
	}
	out = append(out,
		realField{"Stalled message", s.parity.stalledMessage},
		realField{"failures", fmt.Sprintf("install %d upgrade %d total %d", s.parity.installFailures,
			s.parity.upgradeFailures, s.parity.failure)},
		realField{"lastAttemptedReleaseAction", s.parity.lastAction},
		realField{"history", strings.Join(s.history, "; ")},
		realField{"storage", strings.Join(s.parity.storage, "; ")},
		realField{"hooks", strings.Join(s.hooks, "; ")},
		realField{"objects", strings.Join(s.objects, "; ")},
		realField{"events", strings.Join(s.events, " ")},
		realField{"leftovers", strings.Join(s.leftovers, "; ")},
	)
	return out
}

// realRow is one difference: step, field, upstream's value and ours.
type realRow struct{ step, field, upstream, ours string }

// seenExpectations records which listed differences the charts that ran
// showed, and how each install ended; charts run in parallel.
type seenExpectations struct {
	mu       sync.Mutex
	used     map[expectKey]bool
	ran      map[string]bool
	outcomes realcharts.Outcomes
}

// record keeps how run's install ended, for docs/charts.md.
func (s *seenExpectations) record(chart string, run realRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.outcomes[chart] == nil {
		s.outcomes[chart] = map[string]realcharts.Outcome{}
	}
	s.outcomes[chart][string(run.mode)] = realcharts.Outcome{
		Ready:   run.steps[0].parity.conditions[meta.ReadyCondition],
		Install: run.install.Round(time.Second).String(),
	}
}

// writeOutcomes writes the outcomes where realcharts.OutcomesEnv says,
// when it is set and every chart ran.
func (s *seenExpectations) writeOutcomes(t *testing.T) {
	file := os.Getenv(realcharts.OutcomesEnv)
	if file == "" || t.Failed() || t.Skipped() {
		return
	}
	if err := s.outcomes.Write(file); err != nil {
		t.Error(err)
	}
}

// compare lists the differences of ours from upstream that
// realChartsExpected does not list, and marks the listed ones it saw.
func (s *seenExpectations) compare(chart string, mode realMode, upstream, ours realRun) []realRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran[chart] = true
	return compareRealRuns([]string{chart}, mode, upstream, ours, s.used)
}

// checkUnused fails when a listed difference of a chart that ran was not
// seen: the list must stay true.
func (s *seenExpectations) checkUnused(t *testing.T) {
	if t.Failed() || t.Skipped() || len(s.ran) == 0 {
		return
	}
	keys := make([]expectKey, 0, len(realChartsExpected))
	for key := range realChartsExpected {
		if s.ran[key.chart] || key.chart == "*" {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b expectKey) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, key := range keys {
		if !s.used[key] {
			t.Errorf("listed difference not seen (remove it from realChartsExpected and docs/differences.md): %+v", key)
		}
	}
}

// compareRealRuns lists the differences of ours from upstream that
// realChartsExpected lists under none of the scenario's names (a chart's
// name; a generated scenario's feature keys), and marks the listed ones
// it saw.
func compareRealRuns(scenario []string, mode realMode, upstream, ours realRun, used map[expectKey]bool) []realRow {
	steps := realSteps
	if upstream.names != nil {
		steps = upstream.names
	}
	var rows []realRow
	for i, step := range steps {
		mine := ours.steps[i]
		if mode == realModeAfterHooks {
			mine.events = withoutProgressEvents(mine.events, used)
		}
		theirs, minefields := upstream.steps[i].fields(), mine.fields()
		for j, f := range theirs {
			if f.value == minefields[j].value {
				continue
			}
			if key, ok := listedDifference(scenario, mode, f.name); ok {
				used[key] = true
				continue
			}
			rows = append(rows, realRow{step, f.name, f.value, minefields[j].value})
		}
	}
	return rows
}

// listedDifference is the first key of realChartsExpected that lists a
// difference in field for one of the scenario's names.
func listedDifference(scenario []string, mode realMode, field string) (expectKey, bool) {
	for _, name := range scenario {
		key := expectKey{chart: name, mode: mode, field: field}
		if _, ok := realChartsExpected[key]; ok {
			return key, true
		}
	}
	return expectKey{}, false
}

// progressEvents is the key of afterHooks' progress events in
// realChartsExpected.
var progressEvents = expectKey{chart: "*", mode: realModeAfterHooks, field: "events"}

// withoutProgressEvents drops afterHooks' own progress events (listed
// under progressEvents) from events.
func withoutProgressEvents(events []string, used map[expectKey]bool) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		if strings.HasPrefix(e, "Normal/AfterHooks") {
			used[progressEvents] = true
			continue
		}
		out = append(out, e)
	}
	return out
}

func formatRows(rows []realRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-16s | %-26s | %-40s | %s\n", "step", "field", "upstream", "ours")
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-16s | %-26s | %-40s | %s\n", r.step, r.field, orDash(r.upstream), orDash(r.ours))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// expectKey names one expected difference: a chart (the scenario; "*"
// for every chart), the mode ours ran in and the field, at any step.
type expectKey struct {
	chart string
	mode  realMode
	field string
}

// realChartsExpected is every difference from upstream that the real
// charts show and that is kept, with its reason; each also appears in
// docs/differences.md, naming TestRealChartsParity.
var realChartsExpected = map[expectKey]string{
	progressEvents: "afterHooks reports its phases as events AfterHooksStarted and AfterHooksWaiting " +
		"(Trace for notification-controller, which never forwards them); docs/afterhooks.md",
}

func init() {
	// The deadlock chart: its pods need what the post-install hook
	// creates. Upstream (and ours by default) waits before the hooks and
	// fails the install; afterHooks runs the hooks first and is Ready.
	// Every field below follows from that one outcome.
	deadlock := "afterHooks runs the post-install hook before the wait, so the deadlock chart installs " +
		"(docs/differences.md, \"The deadlock chart under afterHooks\")"
	for _, field := range []string{meta.ReadyCondition, "Released", meta.StalledCondition, "Stalled message",
		"failures", "history", "storage", "hooks", "events", "leftovers"} {
		realChartsExpected[expectKey{chart: "cockroachdb", mode: realModeAfterHooks, field: field}] = deadlock
	}
}

// generatedOutcomeFields are the fields that follow from a generated
// step's outcome: a difference in whether it succeeded shows in each.
var generatedOutcomeFields = []string{meta.ReadyCondition, "Released", "TestSuccess", meta.StalledCondition,
	"Stalled message", "failures", "history", "storage", "hooks", "objects", "events", "leftovers"}

func init() {
	// Generated scenarios (TestGeneratedParity), keyed by feature.
	//
	// An object that consents to being recreated is recreated here when
	// an upgrade changes its immutable field, and the upgrade goes on;
	// upstream does not know the consent and the upgrade fails.
	recreate := "an object annotated " + chartgen.ConsentAnnotation + ": enabled is recreated when an upgrade " +
		"changes an immutable field, where upstream's upgrade fails (docs/immutable.md; docs/differences.md, " +
		"\"Generated scenarios side by side\")"
	for _, feature := range chartgen.ConsentFeatures() {
		listGenerated(feature, recreate)
	}
	// A failing hook Job with ttlSecondsAfterFinished: upstream counts it
	// a success once its TTL deleted it; here a hook the wait saw fail
	// fails the release.
	ttl := "a failed Job that its TTL deleted is a failure here, a success upstream (docs/differences.md, " +
		"\"Jobs that failed and were then deleted by their TTL\")"
	for _, hook := range chartgen.FailingTTLHooks() {
		listGenerated(hook, ttl)
	}
}

// listGenerated lists a difference in every outcome field for the
// generated feature.
func listGenerated(feature chartgen.Feature, reason string) {
	for _, field := range generatedOutcomeFields {
		realChartsExpected[expectKey{chart: generatedExpectPrefix + feature.Key(), mode: realModeDefault, field: field}] = reason
	}
}
