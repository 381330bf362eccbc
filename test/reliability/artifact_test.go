package reliability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// Settings of the artifact server trials. The controller runs with a
// shorter --http-timeout than the default 30s, so that a stalled download
// is given up within the test's time, and one retry (default 9) per
// reconcile, so that each fault outlasts a reconcile and shows in Ready.
const (
	artifactHTTPTimeout = 5 * time.Second
	artifactHTTPRetry   = 1
	// artifactStallHold is how long the proxy holds a stalled download
	// open when the controller does not give up: far past the timeout.
	artifactStallHold = 3 * time.Minute
	// artifactTimeout bounds each Helm action of the trials.
	artifactTimeout = 2 * time.Minute
)

// artifactCell is one kind of artifact server trial: a fault of the
// download of the chart of an install or an upgrade.
type artifactCell struct {
	action   string // install, upgrade
	strategy v2.HookWaitStrategy
	fault    framework.ArtifactFaultKind
	// n is how many downloads the fault breaks.
	n int
	// concurrent is the controller's --concurrent, 0 for the default.
	concurrent int
}

func (c artifactCell) String() string {
	var what string
	switch c.fault {
	case framework.ArtifactStatus:
		what = fmt.Sprintf("503 ×%d", c.n)
	case framework.ArtifactStall:
		what = fmt.Sprintf("stalled halfway ×%d", c.n)
		if c.concurrent > 0 {
			what += fmt.Sprintf(", --concurrent=%d", c.concurrent)
		}
	case framework.ArtifactCut:
		what = fmt.Sprintf("connection cut halfway ×%d", c.n)
	}
	return fmt.Sprintf("%s, %s, artifact download: %s", c.action, c.strategy, what)
}

func (c artifactCell) id() string {
	return fmt.Sprintf("art-%s-%s-%s", c.action[:3], strings.ToLower(string(c.strategy)[:1]), c.fault)
}

// artifactCells: each fault of the download of an install's and an
// upgrade's chart, under both strategies. A 503 and a cut connection
// break four downloads (two reconciles of two attempts each), a stall two
// (one reconcile: two attempts of --http-timeout each). The afterHooks
// stalls run with --concurrent=1, so that the stalled download holds the
// controller's only worker: a neighbour then reconciles only once the
// timeout gave the download up. The beforeHooks stalls run with the
// default four workers: the neighbour reconciles while the download hangs.
func artifactCells() []artifactCell {
	var out []artifactCell
	for _, action := range []string{"install", "upgrade"} {
		for _, s := range []v2.HookWaitStrategy{v2.AfterHooks, v2.BeforeHooks} {
			out = append(out,
				artifactCell{action: action, strategy: s, fault: framework.ArtifactStatus, n: 4},
				artifactCell{action: action, strategy: s, fault: framework.ArtifactCut, n: 4})
			stall := artifactCell{action: action, strategy: s, fault: framework.ArtifactStall, n: 2}
			if s == v2.AfterHooks {
				stall.concurrent = 1
			}
			out = append(out, stall)
		}
	}
	return out
}

// artifactRuns is how many times each cell's fault strikes.
func artifactRuns() int {
	if full {
		return 3
	}
	return 1
}

// TestFaultsArtifactServer breaks the controller's download of a chart
// artifact from source-controller: error statuses, a download that stalls
// halfway for longer than --http-timeout, a connection cut halfway, each
// for an install and for an upgrade to a new chart version, with both wait
// strategies. Each cell has a controller of its own that downloads through
// a framework.ArtifactProxy. While the fault lasts:
//
//   - the release does not change: no Helm revision, no remediation,
//     failure counters unchanged (a download failure is not an install or
//     upgrade failure, in upstream Flux either);
//   - Ready is never True for the new generation, and Ready=False names the
//     artifact problem (reason ArtifactFailed, as upstream);
//   - a stalled download is given up after --http-timeout, and a neighbour
//     release in the same shard reconciles meanwhile.
//
// Once the fault is over the release installs or upgrades and becomes
// Ready, with no more revisions than without the fault.
func TestFaultsArtifactServer(t *testing.T) {
	ns := env.Namespace(t)
	all := selectCells(artifactCells())
	// Every chart version a trial uses is published before the
	// HelmRepository exists, so that its first index has them all. Each
	// trial downloads a version of its own: the controller caches charts
	// by digest, and a cached chart is not downloaded again.
	trials := make([]*artifactTrials, len(all))
	for i, c := range all {
		tr := &artifactTrials{cell: c, ns: ns, prefix: fmt.Sprintf("c%d-", i), first: fmt.Sprintf("1.%d.0", i)}
		env.PublishChart(t, faultChart, tr.first, ns)
		for run := range artifactRuns() {
			tr.targets = append(tr.targets, fmt.Sprintf("2.%d.%d", i, run))
			env.PublishChart(t, faultChart, tr.targets[run], ns)
		}
		trials[i] = tr
	}
	repo := env.HelmRepository(t, ns)

	for _, tr := range trials {
		tr.repo = repo.Name
	}
	runTrials(t, all, parallelCells(), func(i int, _ artifactCell) row { return trials[i].runCell(t) })
}

// artifactTrials runs the trials of one cell against a controller of its
// own, which downloads through a proxy of its own.
type artifactTrials struct {
	cell artifactCell
	ns   string
	repo string
	// prefix starts the names of the cell's releases, which share the
	// namespace with the other cells'.
	prefix string
	first  string
	// targets are the chart versions (bases) the runs install or upgrade
	// to, one per run.
	targets []string

	proxy *framework.ArtifactProxy
	ctl   *framework.Controller
	// app is the release the upgrades upgrade; neighbour the release that
	// must reconcile while a download stalls.
	app, neighbour *v2.HelmRelease
}

func (tr *artifactTrials) version(base string) string { return base + "-" + tr.ns }

func (tr *artifactTrials) runCell(t *testing.T) row {
	r := row{Section: "Faults", Case: tr.cell.String()}
	tr.proxy = env.StartArtifactProxy(t)
	args := []string{fmt.Sprintf("--http-timeout=%s", artifactHTTPTimeout), fmt.Sprintf("--http-retry=%d", artifactHTTPRetry)}
	if tr.cell.concurrent > 0 {
		args = append(args, fmt.Sprintf("--concurrent=%d", tr.cell.concurrent))
	}
	ctl, err := framework.StartController(framework.ControllerOptions{
		Binary: env.Binary, Kubeconfig: env.Cluster.Kubeconfig(), LogDir: t.TempDir(),
		Shard: tr.cell.id() + "-" + utilrand.String(4), Args: args, Env: tr.proxy.Env(),
	})
	if err != nil {
		r.Runs, r.Failures = 1, append(r.Failures, "set-up: "+err.Error())
		return r
	}
	tr.ctl = ctl
	defer cleanupShard(tr.ctl, tr.ns)
	if err := tr.prepare(); err != nil {
		r.Runs, r.Failures = 1, append(r.Failures, "set-up: "+err.Error())
		tr.dumpLogs(t, -1)
		return r
	}
	var notes []artifactOutcome
	for run := range tr.targets {
		r.Runs++
		out := tr.runOnce(run)
		if len(out.broken) > 0 {
			// One entry per failed run, as the table counts them.
			r.Failures = append(r.Failures, fmt.Sprintf("run %d: %s", run+1, strings.Join(out.broken, "; ")))
		}
		if len(out.broken) > 0 {
			tr.dumpLogs(t, run)
		}
		notes = append(notes, out)
	}
	r.Note = summarizeArtifact(tr.ns, notes)
	return r
}

func (tr *artifactTrials) dumpLogs(t *testing.T, run int) {
	var b strings.Builder
	tr.ctl.DumpLogs(&b, 60)
	t.Logf("%s, run %d: controller logs:\n%s", tr.cell, run+1, b.String())
}

// release is a HelmRelease of the fault chart at version base in the
// cell's shard, with remediation retries, so that a download failure
// wrongly counted as an install or upgrade failure shows as a
// remediation.
func (tr *artifactTrials) release(name, base string) *v2.HelmRelease {
	hr := framework.Release(tr.ns, tr.prefix+name, tr.repo, faultChart, tr.version(base), phaseValues(name, time.Second, 2*time.Second))
	framework.Sharded(hr, tr.ctl)
	hr.Spec.Timeout = &metav1.Duration{Duration: artifactTimeout}
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{Remediation: &helmv2.InstallRemediation{Retries: 3}}, WaitStrategy: tr.cell.strategy}
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 3}}, WaitStrategy: tr.cell.strategy}
	return hr
}

// phaseValues are values of the fault chart with hooks and application
// taking the given time.
func phaseValues(message string, hook, app time.Duration) string {
	return fmt.Sprintf(`{"message":%q,"preHookDelay":%q,"postHookDelay":%q,"deleteHookDelay":%q,"appDelay":%q}`,
		message, hook, hook, hook, app)
}

// prepare installs the release the upgrades upgrade and, for stalls, the
// neighbour.
func (tr *artifactTrials) prepare() error {
	var first []*v2.HelmRelease
	if tr.cell.action == "upgrade" {
		tr.app = tr.release("app", tr.first)
		first = append(first, tr.app)
	}
	if tr.cell.fault == framework.ArtifactStall {
		tr.neighbour = tr.release("neighbour", tr.first)
		first = append(first, tr.neighbour)
	}
	for _, hr := range first {
		if err := env.Client.Create(context.Background(), hr); err != nil {
			return err
		}
	}
	for _, hr := range first {
		if err := env.Poll(3*time.Minute, func(ctx context.Context) error {
			if err := tr.ctl.Running(); err != nil {
				return err
			}
			if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
				return err
			}
			return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
		}); err != nil {
			return fmt.Errorf("installing %s: %w", hr.Name, err)
		}
	}
	return nil
}

// artifactOutcome is what one run saw.
type artifactOutcome struct {
	broken []string
	// faultLasted is from the action's start to the end of the fault.
	faultLasted time.Duration
	// settled is from the end of the fault to Ready.
	settled time.Duration
	// messages are the Ready messages seen while the fault lasted.
	messages []string
	// artifactFailed counts the ArtifactFailed events of the run.
	artifactFailed int
	// dropped are how long the stalled downloads lasted until the
	// controller gave them up.
	dropped []time.Duration
	// neighbour is how long the neighbour's reconcile took to be handled
	// and whether a stalled download still hung when it was.
	neighbour       time.Duration
	neighbourDuring bool
}

// runOnce runs one trial: the fault is set, the action started, the
// release watched until the fault is over and then until it is Ready.
func (tr *artifactTrials) runOnce(run int) artifactOutcome {
	var out artifactOutcome
	ctx := context.Background()
	name := fmt.Sprintf("r%d", run+1)
	hr := tr.release(name, tr.targets[run])
	name = hr.Name
	wantVersion := 1
	if tr.cell.action == "upgrade" {
		hr = tr.app
		wantVersion = run + 2
	}
	before, err := env.ReadStorage(ctx, env.Client, tr.ns, hr.Name)
	if err != nil {
		out.broken = append(out.broken, err.Error())
		return out
	}
	remBefore := remediationEvents(tr.ns, hr.Name)
	artBefore := env.CountEvents(&nopTB{}, tr.ns, hr.Name, framework.EventWant{Reason: helmv2.ArtifactFailedReason})
	chartPath := "/helmchart/" + tr.ns + "/" + tr.ns + "-" + hr.Name + "/"
	tr.proxy.Inject(framework.ArtifactFault{
		Kind: tr.cell.fault, Hold: artifactStallHold,
		Match: func(r *http.Request) bool { return strings.Contains(r.URL.Path, chartPath) },
	}, tr.cell.n)
	faultStart := len(tr.proxy.Requests())

	start := time.Now()
	var generation int64
	if tr.cell.action == "install" {
		if err := env.Client.Create(ctx, hr); err != nil {
			out.broken = append(out.broken, "creating the release: "+err.Error())
			return out
		}
		generation = 1
	} else {
		cur := &v2.HelmRelease{}
		if err := env.Get(ctx, cur, hr.Namespace, hr.Name); err != nil {
			out.broken = append(out.broken, err.Error())
			return out
		}
		cur.Spec.Chart.Spec.Version = tr.version(tr.targets[run])
		cur.Spec.Values = framework.JSON(phaseValues(name, time.Second, 2*time.Second))
		if err := env.Client.Update(ctx, cur); err != nil {
			out.broken = append(out.broken, "changing the chart version: "+err.Error())
			return out
		}
		generation = cur.Generation
	}

	// While the fault lasts.
	var neighbourToken string
	var neighbourAsked time.Time
	err = env.Poll(5*time.Minute, func(ctx context.Context) error {
		if err := tr.ctl.Running(); err != nil {
			return errors.Join(errStop, err)
		}
		cur := &v2.HelmRelease{}
		if err := env.Get(ctx, cur, hr.Namespace, hr.Name); err != nil {
			return err
		}
		over := tr.proxy.Over()
		if !over {
			if problem := tr.changedDuringFault(ctx, cur, generation, before); problem != "" && !slices.Contains(out.broken, problem) {
				out.broken = append(out.broken, problem)
			}
		}
		out.note(cur)
		if tr.neighbour != nil && tr.stalling() && neighbourToken == "" {
			neighbourToken, neighbourAsked = tr.requestReconcile(ctx, tr.neighbour)
		}
		if neighbourToken != "" && out.neighbour == 0 {
			nb := &v2.HelmRelease{}
			if err := env.Get(ctx, nb, tr.neighbour.Namespace, tr.neighbour.Name); err == nil && nb.Status.LastHandledReconcileAt == neighbourToken {
				out.neighbour, out.neighbourDuring = time.Since(neighbourAsked), tr.stalling()
			}
		}
		if !over {
			return errors.New("the fault lasts")
		}
		if neighbourToken != "" && out.neighbour == 0 {
			return errors.New("the neighbour's reconcile is not handled yet")
		}
		return nil
	})
	if err != nil {
		out.broken = append(out.broken, fmt.Sprintf("the fault did not end (%d of %d downloads broken): %v",
			tr.cell.n-tr.proxy.Left(), tr.cell.n, err))
		return out
	}
	faultEnd := time.Now()
	out.faultLasted = faultEnd.Sub(start)

	// After the fault.
	reason := helmv2.InstallSucceededReason
	if tr.cell.action == "upgrade" {
		reason = helmv2.UpgradeSucceededReason
	}
	end := &v2.HelmRelease{}
	err = env.Poll(3*time.Minute, func(ctx context.Context) error {
		if err := tr.ctl.Running(); err != nil {
			return errors.Join(errStop, err)
		}
		if err := env.Get(ctx, end, hr.Namespace, hr.Name); err != nil {
			return err
		}
		// The failure of the last broken download is reported once the
		// reconcile gives up, after the fault is over.
		out.note(end)
		if lie := readyLie(ctx, end); lie != "" && !slices.Contains(out.broken, lie) {
			out.broken = append(out.broken, lie)
		}
		if err := framework.ReleaseReady(end, framework.ReleaseWant{Reason: reason, Version: wantVersion}); err != nil {
			return err
		}
		if latest := end.Status.History.Latest(); latest.ChartVersion != tr.version(tr.targets[run]) {
			return fmt.Errorf("deployed chart %s, want %s", latest.ChartVersion, tr.version(tr.targets[run]))
		}
		return nil
	})
	if err != nil {
		out.broken = append(out.broken, fmt.Sprintf("stuck %s after the fault ended: %v", time.Since(faultEnd).Round(time.Second), err))
		return out
	}
	out.settled = time.Since(faultEnd)

	// The end state.
	stored, err := env.ReadStorage(ctx, env.Client, tr.ns, hr.Name)
	if err != nil {
		out.broken = append(out.broken, err.Error())
		return out
	}
	if got, want := len(stored), len(before)+1; got != want {
		out.broken = append(out.broken, fmt.Sprintf("Helm storage %s: %d revisions, want %d", framework.Describe(stored), got, want))
	}
	if end.Status.Failures != 0 || end.Status.InstallFailures != 0 || end.Status.UpgradeFailures != 0 {
		out.broken = append(out.broken, fmt.Sprintf("failure counters: failures %d, install %d, upgrade %d; want 0 as without the fault",
			end.Status.Failures, end.Status.InstallFailures, end.Status.UpgradeFailures))
	}
	if n := remediationEvents(tr.ns, hr.Name) - remBefore; n > 0 {
		out.broken = append(out.broken, fmt.Sprintf("%d rollback/uninstall event(s)", n))
	}
	out.artifactFailed = env.CountEvents(&nopTB{}, tr.ns, hr.Name, framework.EventWant{Reason: helmv2.ArtifactFailedReason}) - artBefore
	// A reconcile queued behind the failed one (its HelmChart turned Ready
	// meanwhile, which brings a release back at once, as upstream) may
	// replace Ready before a poll sees it: the Warning event names the
	// failure then.
	if problem := artifactNamed(tr.cell.fault, append(out.messages, tr.artifactFailedEvents(ctx, hr.Name)...)); problem != "" {
		out.broken = append(out.broken, problem)
	}
	for _, req := range tr.proxy.Requests()[faultStart:] {
		if req.Fault != framework.ArtifactStall {
			continue
		}
		if !req.ClientLeft {
			out.broken = append(out.broken, fmt.Sprintf("a stalled download was not given up: the proxy held it %s", req.Took.Round(time.Second)))
		}
		out.dropped = append(out.dropped, req.Took)
	}
	if tr.neighbour != nil {
		if out.neighbour == 0 {
			out.broken = append(out.broken, "the neighbour did not reconcile")
		}
		if tr.cell.concurrent == 0 && !out.neighbourDuring {
			out.broken = append(out.broken, fmt.Sprintf("with %s the neighbour reconciled only after the stall (%s after its request)",
				"the default --concurrent", out.neighbour.Round(100*time.Millisecond)))
		}
	}
	return out
}

// note records Ready=False messages of the run.
func (o *artifactOutcome) note(hr *v2.HelmRelease) {
	if c := conditions.Get(hr, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionFalse {
		msg := c.Reason + ": " + c.Message
		if !slices.Contains(o.messages, msg) {
			o.messages = append(o.messages, msg)
		}
	}
}

// stalling reports whether a stalled download hangs now: a stall fault
// has broken a download that has not ended.
func (tr *artifactTrials) stalling() bool {
	return tr.cell.fault == framework.ArtifactStall && tr.proxy.Left() < tr.cell.n && !tr.proxy.Over()
}

// requestReconcile asks for a reconcile of hr and returns the token and
// when it was asked; empty when the request failed (asked again at the
// next poll).
func (tr *artifactTrials) requestReconcile(ctx context.Context, hr *v2.HelmRelease) (string, time.Time) {
	token := fmt.Sprintf("%d", time.Now().UnixNano())
	cur := &v2.HelmRelease{}
	if err := env.Get(ctx, cur, hr.Namespace, hr.Name); err != nil {
		return "", time.Time{}
	}
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations[meta.ReconcileRequestAnnotation] = token
	if err := env.Client.Update(ctx, cur); err != nil {
		return "", time.Time{}
	}
	return token, time.Now()
}

// changedDuringFault describes how the release changed while its
// download failed, or is empty.
func (tr *artifactTrials) changedDuringFault(ctx context.Context, hr *v2.HelmRelease, generation int64, before []framework.Stored) string {
	if hr.Status.ObservedGeneration >= generation && conditions.IsReady(hr) {
		return fmt.Sprintf("Ready=True for generation %d while the download failed", generation)
	}
	if hr.Status.Failures != 0 || hr.Status.InstallFailures != 0 || hr.Status.UpgradeFailures != 0 {
		return fmt.Sprintf("failure counted while the download failed: failures %d, install %d, upgrade %d",
			hr.Status.Failures, hr.Status.InstallFailures, hr.Status.UpgradeFailures)
	}
	stored, err := env.ReadStorage(ctx, env.Client, tr.ns, hr.Name)
	if err == nil && framework.Describe(stored) != framework.Describe(before) {
		return fmt.Sprintf("Helm storage changed while the download failed: %s, before %s", framework.Describe(stored), framework.Describe(before))
	}
	return ""
}

// artifactFailedEvents are the ArtifactFailed Warning events of the
// HelmRelease name, each as "reason: message", as note records Ready.
func (tr *artifactTrials) artifactFailedEvents(ctx context.Context, name string) []string {
	events, err := env.Events(ctx, tr.ns, name)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range events {
		if e.Type == corev1.EventTypeWarning && e.Reason == helmv2.ArtifactFailedReason {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// artifactNamed checks that Ready named the artifact problem while the
// fault lasted.
func artifactNamed(fault framework.ArtifactFaultKind, messages []string) string {
	want := map[framework.ArtifactFaultKind][]string{
		framework.ArtifactStatus: {"503"},
		framework.ArtifactStall:  {"Client.Timeout", "deadline exceeded", "timeout"},
		framework.ArtifactCut:    {"EOF", "connection reset", "unexpected"},
	}[fault]
	for _, m := range messages {
		if !strings.HasPrefix(m, helmv2.ArtifactFailedReason+": ") || !strings.Contains(m, "artifact") {
			continue
		}
		for _, w := range want {
			if strings.Contains(m, w) {
				return ""
			}
		}
	}
	return fmt.Sprintf("Ready=False/%s naming the artifact and one of %q never seen; seen: %q",
		helmv2.ArtifactFailedReason, want, messages)
}

// readyLie returns a description when hr says Ready for its generation
// while its application is not ready.
func readyLie(ctx context.Context, hr *v2.HelmRelease) string {
	if hr.Status.ObservedGeneration != hr.Generation || !conditions.IsReady(hr) {
		return ""
	}
	if err := env.DeploymentReady(ctx, hr.Namespace, hr.Name); errors.Is(err, framework.ErrNotReady) {
		return "Ready=True while the application is not ready: " + err.Error()
	}
	return ""
}

// cleanupShard deletes the shard's HelmReleases in ns, gives the
// controller 30 s to uninstall them, and stops it.
func cleanupShard(ctl *framework.Controller, ns string) {
	env.DeleteReleases(ns, map[string]string{framework.ShardLabel: ctl.Options().Shard}, 30*time.Second)
	_ = ctl.StopAll()
}

// summarizeArtifact writes the figures of a cell's runs.
func summarizeArtifact(ns string, outs []artifactOutcome) string {
	var lasted, settled, dropped, neighbour []time.Duration
	var messages []string
	events := 0
	during := 0
	for _, o := range outs {
		lasted = append(lasted, o.faultLasted)
		settled = append(settled, o.settled)
		dropped = append(dropped, o.dropped...)
		events += o.artifactFailed
		for _, m := range o.messages {
			if strings.HasPrefix(m, helmv2.ArtifactFailedReason) && len(messages) == 0 {
				messages = append(messages, m)
			}
		}
		if o.neighbour > 0 {
			neighbour = append(neighbour, o.neighbour)
			if o.neighbourDuring {
				during++
			}
		}
	}
	note := fmt.Sprintf("--http-timeout=%s --http-retry=%d; fault lasted %s, Ready %s after it; %d ArtifactFailed event(s)",
		artifactHTTPTimeout, artifactHTTPRetry, spread(lasted), spread(settled), events)
	if len(dropped) > 0 {
		note += fmt.Sprintf("; stalled downloads given up after %s (proxy would hold %s)", spread(dropped), artifactStallHold)
	}
	if len(neighbour) > 0 {
		note += fmt.Sprintf("; neighbour reconciled %s after its request, %d of %d while a download hung", spread(neighbour), during, len(neighbour))
	}
	if len(messages) > 0 {
		note += "; Ready=False " + compactMessage(messages[0], ns)
	}
	return note
}

// compactMessage shortens a Ready message for the table: the namespace and
// the artifact URL are left out.
func compactMessage(msg, ns string) string {
	msg = artifactURL.ReplaceAllString(strings.ReplaceAll(msg, "-"+ns, ""), "GET <artifact>")
	return shorten(msg, 240)
}

var artifactURL = regexp.MustCompile(`GET http://\S+\.tgz`)

// shorten cuts s to n bytes with an ellipsis.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
