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

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
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
	"github.com/afterhooks/helm-controller/internal/features"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/parity"
	"github.com/afterhooks/helm-controller/test/realcharts"
)

// TestRealChartsParity installs every chart of the real-chart corpus
// (test/realcharts, docs/charts.md) under upstream helm-controller, under
// ours in default mode and under ours with waitStrategy afterHooks, each
// time in a fresh namespace, and takes each through the same steps: by
// default install, a no-op reconcile and an uninstall; with
// HELM_CONTROLLER_PARITY=full (make parity) every step of realFullSteps.
// After every step it compares what users read of the HelmRelease, Helm
// storage and the cluster (package test/parity); a difference not listed
// in realChartsExpected fails the test with a table. Charts run in
// parallel; one chart's three runs follow each other, since charts own
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
	steps := realSteps()
	seen := &seenExpectations{expected: realExpected(steps), used: map[parity.Key]bool{}, ran: map[string]bool{},
		outcomes: realcharts.Outcomes{}}
	t.Cleanup(func() {
		seen.checkUnused(t)
		seen.writeOutcomes(t)
	})
	// Each chart in a subtest of its own goroutine, a few at a time: with
	// t.Parallel, -parallel (GOMAXPROCS, 2 on the CI machine) would run
	// two charts at once, and a run mostly waits on the cluster.
	var wg sync.WaitGroup
	slots := make(chan struct{}, realChartsConcurrency(steps))
	for _, c := range charts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(c.Name, func(t *testing.T) { parityRealChart(t, c, bin, steps, seen) })
		}()
	}
	wg.Wait()
}

// realChartsConcurrency is how many charts run at once: fewer for the
// full steps, whose failing upgrades keep crash-looping pods and their
// waits on the 2-core machine.
func realChartsConcurrency(steps []realStep) int {
	if len(steps) > len(realShortSteps) {
		return 4
	}
	return 6
}

// parityRealChart runs chart c under upstream, then under ours in each
// mode, and compares each of ours with upstream.
func parityRealChart(t *testing.T, c realcharts.Chart, bin string, steps []realStep, seen *seenExpectations) {
	dir, err := c.Dir(bin)
	if err != nil {
		t.Skip(err.Error())
	}
	ref, err := env.Charts.AddChart(dir, chartserver.WithVersion("0.0.0-corpus."+c.Name))
	if err != nil {
		t.Fatalf("publishing %s: %v", c.Name, err)
	}
	upstream := map[realMode]realRun{}
	for _, mode := range []realMode{realModeUpstream, realModeUpstreamDrift} {
		upstream[mode] = runRealChart(t, c, dir, ref, mode, steps)
		seen.record(c.Name, upstream[mode])
	}
	for _, mode := range oursModes {
		ours := runRealChart(t, c, dir, ref, mode, steps)
		seen.record(c.Name, ours)
		if rows := seen.compare(c.Name, upstream[upstreamOf(mode)], ours); len(rows) > 0 {
			t.Errorf("%s: ours (%s) differs from upstream where no difference is listed:\n%s", c.Name, mode, parity.FormatRows(rows))
		}
	}
}

// realMode is one way of running a chart.
type realMode string

const (
	realModeUpstream realMode = "upstream"
	// realModeUpstreamDrift is upstream with drift detection enabled:
	// what ours' drift mode is compared with, since upstream detects and
	// corrects drift too.
	realModeUpstreamDrift realMode = "upstream-drift"
	realModeDefault       realMode = "default"
	realModeAfterHooks    realMode = "afterHooks"
	// realModeOrdered sets spec.waitStrategy.name: ordered.
	realModeOrdered realMode = "ordered"
	// realModeDefaultToAfterHooks runs the controller with the
	// DefaultToAfterHooks gate on and the spec of the default mode.
	realModeDefaultToAfterHooks realMode = "DefaultToAfterHooks"
	// realModeDrift turns drift detection on (mode enabled).
	realModeDrift realMode = "drift"
)

// upstreamOf is the upstream run a mode of ours is compared with: the
// same spec where upstream knows it (drift detection), else upstream with
// the default spec, which a user swapping controllers runs today.
func upstreamOf(mode realMode) realMode {
	if mode == realModeDrift {
		return realModeUpstreamDrift
	}
	return realModeUpstream
}

// upstreamMode tells whether mode runs upstream's binary.
func upstreamMode(mode realMode) bool {
	return mode == realModeUpstream || mode == realModeUpstreamDrift
}

// oursModes are the modes ours runs each real chart in.
var oursModes = []realMode{realModeDefault, realModeAfterHooks, realModeOrdered, realModeDefaultToAfterHooks, realModeDrift}

// expectedLike is the mode whose listed differences a mode shares: its
// relation to upstream, written down once. The DefaultToAfterHooks gate
// gives a release without waitStrategy what afterHooks gives; ordered
// (a chart without HIP-0025 annotations applies in one batch) and drift
// detection (a release nobody edits has no drift) end as the default
// does. What a mode shows besides is listed under its own name.
func expectedLike(mode realMode) realMode {
	switch mode {
	case realModeDefaultToAfterHooks:
		return realModeAfterHooks
	case realModeOrdered, realModeDrift:
		return realModeDefault
	}
	return mode
}

// realRun is one side's observations, and how long its install took to
// settle.
type realRun struct {
	parity.Run
	install time.Duration
}

// realSide is one run of a chart: a controller, its namespace and
// HelmRelease, and what the steps carry from one to the next.
type realSide struct {
	*paritySide
	chart realcharts.Chart
	dir   string
	mode  realMode
	// uids are the live objects' uids at the previous observation, by
	// normalised name.
	uids map[string]string
	// installed is what the release made, read right before the
	// uninstall: what the uninstall should remove.
	installed []*unstructured.Unstructured
	// install is how long the install took to settle.
	install time.Duration
	// plans, when set, counts the side's planned steps for a report.
	plans *planTally
}

func runRealChart(t *testing.T, c realcharts.Chart, dir string, ref chartserver.ChartRef, mode realMode, steps []realStep) realRun {
	t.Helper()
	side, repo := startRealSide(t, c, dir, mode, "corpus")
	bindClaims(t, side.ns, c.Sim.Claims)
	side.hr = framework.Sharded(realChartRelease(c, side.ns, repo, ref, mode), side.ctl)
	run := realRun{Run: parity.Run{Mode: string(mode)}}
	for _, step := range steps {
		side.runStep(t, &run, step)
	}
	run.install = side.install
	t.Logf("%s (%s): install settled in %s", c.Name, mode, run.install.Round(time.Second))
	recordRun(t, c.Name, run.Run)
	return run
}

// startRealSide starts, for a fresh namespace, a controller of its own
// (upstream's binary for the upstream modes, ours otherwise) on a shard
// named after shard, for chart c in dir, and returns the side with the
// name of the namespace's HelmRepository. The real charts and the
// generated scenarios both start their sides here.
func startRealSide(t *testing.T, c realcharts.Chart, dir string, mode realMode, shard string) (*realSide, string) {
	t.Helper()
	side := &realSide{paritySide: &paritySide{name: string(mode), ns: env.Namespace(t)}, chart: c, dir: dir, mode: mode}
	if upstreamMode(mode) {
		side.binary = framework.UpstreamBinary(t)
	}
	repo := env.HelmRepository(t, side.ns)
	var args []string
	if mode == realModeDefaultToAfterHooks {
		args = append(args, "--feature-gates="+features.DefaultToAfterHooks+"=true")
	}
	side.ctl = env.StartShard(t, side.ns, framework.ControllerOptions{Shard: shard + "-" + rand.String(8), Binary: side.binary, Args: args})
	framework.EnsureRunning(t, side.ctl)
	return side, repo.Name
}

// runStep plans step (ours), runs it, observes the side after it and
// compares what happened with the plan.
func (s *realSide) runStep(t *testing.T, run *realRun, step realStep) {
	t.Helper()
	plan := s.takePlan(t, step)
	step.do(s, t)
	var before parity.Observation
	if n := len(run.Steps); n > 0 {
		before = run.Steps[n-1].Observation
	}
	observed := s.observeStep(t, step)
	run.Steps = append(run.Steps, observed)
	s.checkPlan(t, step.name, plan, before, observed.Observation)
}

// observeStep is the side's observation after step, with a planted
// difference if realPlantEnv asks for one.
func (s *realSide) observeStep(t *testing.T, step realStep) parity.Step {
	t.Helper()
	observe := step.observe
	if observe == nil {
		observe = (*realSide).observe
	}
	return parity.Step{Name: step.name, Observation: plantedObservation(step.name, s.mode, observe(s, t))}
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
	switch mode {
	case realModeAfterHooks:
		hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
		hr.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	case realModeOrdered:
		hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	case realModeDrift, realModeUpstreamDrift:
		hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
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

// observe reads the HelmRelease, Helm storage and the release's live
// objects, and which of them were made again since the last observation.
func (s *realSide) observe(t *testing.T) parity.Observation {
	t.Helper()
	snap := s.snapshot(t)
	obs := parity.Observation{Conditions: snap.conditions, StalledMessage: snap.stalledMessage,
		InstallFailures: snap.installFailures, UpgradeFailures: snap.upgradeFailures, Failures: snap.failure,
		LastAction: snap.lastAction, ObservedGeneration: snap.observed, Storage: snap.storage, Events: s.eventReasons(t)}
	// An entry's digest hashes the release with its namespace and
	// manifest, which name the side's namespace: it cannot match across
	// sides, so only the values' digest is compared.
	for _, h := range s.hr.Status.History {
		obs.History = append(obs.History, fmt.Sprintf("v%d %s %s@%s config %s",
			h.Version, h.Status, h.ChartName, h.ChartVersion, h.ConfigDigest))
	}
	stored := env.Storage(t, s.ns, s.hr.Name)
	if len(stored) == 0 {
		return obs
	}
	latest := stored[len(stored)-1].Release
	uids := map[string]string{}
	for _, h := range latest.Hooks {
		phase := "never run"
		if h.LastRun.Phase != "" {
			phase = string(h.LastRun.Phase)
		}
		name := randomSuffix.ReplaceAllString(h.Name, "-<random>")
		obs.Hooks = append(obs.Hooks, fmt.Sprintf("%s/%s %v: %s", h.Kind, name, h.Events, phase))
		for _, obj := range manifestObjects(t, s.ns, h.Manifest) {
			if uid, ok := liveUID(t, obj); ok {
				uids[parity.HookPrefix+s.normalise(randomSuffix.ReplaceAllString(objectName(obj), "-<random>"))] = uid
			}
		}
	}
	sort.Strings(obs.Hooks)
	obs.HooksRun = hooksRun(&latest, obs.LastAction)
	for _, obj := range manifestObjects(t, s.ns, latest.Manifest) {
		if uid, ok := liveUID(t, obj); ok {
			name := s.normalise(objectName(obj))
			obs.Objects = append(obs.Objects, name)
			uids[name] = uid
		}
	}
	sort.Strings(obs.Objects)
	obs.Recreated = parity.Recreated(s.uids, uids)
	s.uids = uids
	return obs
}

// releaseObjects is everything an install of c made: the latest release's
// objects and hooks, and the CRDs of the chart's crds/ directories.
func (s *realSide) releaseObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	if stored := env.Storage(t, s.ns, s.hr.Name); len(stored) > 0 {
		latest := stored[len(stored)-1].Release
		objs = manifestObjects(t, s.ns, latest.Manifest)
		for _, h := range latest.Hooks {
			objs = append(objs, manifestObjects(t, s.ns, h.Manifest)...)
		}
	}
	crds, err := realcharts.CRDNames(s.dir)
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

// uninstalledObservation records what is left of the release's objects
// and storage once its HelmRelease is gone, then deletes the
// cluster-scoped leftovers so that the next run starts from the same
// cluster.
func (s *realSide) uninstalledObservation(t *testing.T) parity.Observation {
	t.Helper()
	obs := parity.Observation{Events: s.settledEvents(t)}
	for _, r := range env.Storage(t, s.ns, s.hr.Name) {
		obs.Storage = append(obs.Storage, fmt.Sprintf("v%d %s", r.Release.Version, r.Release.Info.Status))
	}
	seen := map[string]bool{}
	for _, obj := range s.installed {
		name := objectName(obj)
		if _, ok := liveUID(t, obj); seen[name] || !ok {
			continue
		}
		seen[name] = true
		obs.Leftovers = append(obs.Leftovers, s.normalise(name))
		if obj.GetNamespace() == "" && !namespaced(t, obj) {
			deleteAndWait(t, obj)
		}
	}
	sort.Strings(obs.Leftovers)
	return obs
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

// liveUID is the uid of obj on the cluster, and whether it is there; an
// object of a kind the API server does not serve (its CRD is gone) is
// not.
func liveUID(t *testing.T, obj *unstructured.Unstructured) (string, bool) {
	t.Helper()
	probe := &unstructured.Unstructured{}
	probe.SetGroupVersionKind(obj.GroupVersionKind())
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), probe)
	switch {
	case err == nil:
		return string(probe.GetUID()), true
	case apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err):
		return "", false
	default:
		t.Fatalf("reading %s: %v", objectName(obj), err)
		return "", false
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

// seenExpectations records which listed differences the charts that ran
// showed, and how each install ended; charts run in parallel.
type seenExpectations struct {
	mu sync.Mutex
	// expected are the listed differences of the steps that run.
	expected map[parity.Key]string
	used     map[parity.Key]bool
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
	s.outcomes[chart][run.Mode] = realcharts.Outcome{
		Ready:   run.Steps[0].Observation.Conditions[meta.ReadyCondition],
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
func (s *seenExpectations) compare(chart string, upstream, ours realRun) []parity.Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran[chart] = true
	return compareRealRuns(chart, upstream.Run, ours.Run, s.expected, s.used)
}

// checkUnused fails when a listed difference of a chart that ran was not
// seen: the list must stay true.
func (s *seenExpectations) checkUnused(t *testing.T) {
	if t.Failed() || t.Skipped() || len(s.ran) == 0 {
		return
	}
	keys := make([]parity.Key, 0, len(s.expected))
	for key := range s.expected {
		if s.ran[key.Scenario] || key.Scenario == parity.AnyScenario {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b parity.Key) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, key := range keys {
		if !s.used[key] {
			t.Errorf("listed difference not seen (remove it from realChartsExpected and docs/differences.md): %+v", key)
		}
	}
}

// compareRealRuns compares ours with upstream after dropping afterHooks'
// own progress events, listed once for every chart.
func compareRealRuns(chart string, upstream, ours parity.Run, expected map[parity.Key]string, used map[parity.Key]bool) []parity.Row {
	mode := realMode(ours.Mode)
	steps := slices.Clone(ours.Steps)
	for i := range steps {
		events := steps[i].Observation.Events
		if expectedLike(mode) == realModeAfterHooks {
			events = withoutListedEvents(events, "Normal/AfterHooks", progressEvents, used)
		}
		if mode == realModeOrdered {
			events = withoutListedEvents(events, "Normal/ResourceGroup", orderedEvents, used)
		}
		steps[i].Observation.Events = events
	}
	ours.Steps, ours.Mode = steps, string(expectedLike(mode))
	return parity.Compare(chart, upstream, ours, expected, used)
}

// progressEvents is the key of afterHooks' progress events in
// realChartsExpected.
var progressEvents = parity.Key{Scenario: parity.AnyScenario, Mode: string(realModeAfterHooks), Field: "events"}

// orderedEvents is the key of the ordered mode's batch events
// (ResourceGroupApplied, ResourceGroupReady) in realChartsExpected.
var orderedEvents = parity.Key{Scenario: parity.AnyScenario, Mode: string(realModeOrdered), Field: "events"}

// withoutListedEvents drops the events that start with prefix, a mode's
// own events listed under key, and marks key used when it dropped one.
func withoutListedEvents(events []string, prefix string, key parity.Key, used map[parity.Key]bool) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			used[key] = true
			continue
		}
		out = append(out, e)
	}
	return out
}

// realChartsExpected is every difference from upstream that the real
// charts show and that is kept, with its reason; each also appears in
// docs/differences.md, naming TestRealChartsParity.
var realChartsExpected = map[parity.Key]string{
	progressEvents: "afterHooks reports its phases as events AfterHooksStarted and AfterHooksWaiting " +
		"(Trace for notification-controller, which never forwards them); docs/afterhooks.md",
	orderedEvents: "waitStrategy ordered reports each batch as events ResourceGroupApplied and ResourceGroupReady " +
		"(docs/sequencing.md)",
}

// realChartsFullOnly are the listed differences only the full steps
// show (the short set never upgrades): left out of the short set's list,
// so that its check for listed differences not seen holds.
var realChartsFullOnly = map[parity.Key]bool{}

// realExpected is realChartsExpected for the steps that run.
func realExpected(steps []realStep) map[parity.Key]string {
	out := make(map[parity.Key]string, len(realChartsExpected))
	for key, reason := range realChartsExpected {
		if len(steps) > len(realShortSteps) || !realChartsFullOnly[key] {
			out[key] = reason
		}
	}
	return out
}

func init() {
	// The deadlock chart: its pods need what the post-install hook
	// creates. Upstream (and ours by default) waits before the hooks and
	// fails the install; afterHooks runs the hooks first and is Ready.
	// Every field below follows from that one outcome: under the full
	// steps, upgrades over a deployed release (the init hook runs again,
	// a failed upgrade has a release to roll back to) instead of over a
	// failed one.
	deadlock := "afterHooks runs the post-install hook before the wait, so the deadlock chart installs " +
		"(docs/differences.md, \"The deadlock chart under afterHooks\")"
	for _, field := range []string{meta.ReadyCondition, "Released", meta.StalledCondition, "Stalled message",
		"failures", "history", "storage", "hooks", "events", "leftovers"} {
		realChartsExpected[parity.Key{Scenario: "cockroachdb", Mode: string(realModeAfterHooks), Field: field}] = deadlock
	}
	for _, field := range []string{"recreated", "Remediated"} {
		key := parity.Key{Scenario: "cockroachdb", Mode: string(realModeAfterHooks), Field: field}
		realChartsExpected[key] = deadlock
		realChartsFullOnly[key] = true
	}
	listRolledBackHistory()
}

// listRolledBackHistory lists, for the full steps, how status.history
// and Helm storage differ after the failing upgrade's two rollbacks, in
// every chart whose pods the upgrade waits for (docs/differences.md,
// "After a second rollback"): upstream keeps an older entry in the
// history, and upgrades once more when the spec goes back to what the
// rollback restored, because it took the failing spec's post renderers
// for observed. The cluster ends the same.
func listRolledBackHistory() {
	reason := "after the failing upgrade's second rollback upstream's history keeps an older entry, and upstream " +
		"upgrades again when the spec returns to what the rollback restored (docs/differences.md, \"After a second rollback\")"
	after := []string{"failing upgrade", "working spec back", "drift corrected", "change while suspended", "resumed"}
	for _, mode := range []realMode{realModeDefault, realModeAfterHooks} {
		for i, step := range after {
			fields := []string{"history"}
			if i > 0 {
				fields = append(fields, "storage")
			}
			for _, field := range fields {
				key := parity.Key{Scenario: parity.AnyScenario, Mode: string(mode), Field: field, Step: step}
				realChartsExpected[key] = reason
				realChartsFullOnly[key] = true
			}
		}
	}
}
