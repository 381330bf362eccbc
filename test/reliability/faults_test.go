package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The phases of an action in which a fault strikes.
const (
	phasePreHooks    = "pre hooks"
	phaseApply       = "apply"
	phasePostHooks   = "post hooks"
	phaseWait        = "readiness wait"
	phaseCommit      = "storage commit"
	phaseRemediation = "remediation"
	phaseDeleteHook  = "pre-delete hook"
	phaseDelete      = "delete"
	// phaseHookCleanup is the deletion of what the hooks left, after
	// Helm's uninstall (spec.uninstall.deleteHookResources).
	phaseHookCleanup = "hook cleanup"
)

// faultChart is a chart whose hooks and application take long enough to
// be interrupted (test/e2e/framework/charts/reliability-phases).
const faultChart = "reliability-phases"

// Delays of the chart's parts, in its values. The application outlasts the
// post hook, so that under afterHooks the readiness wait still has
// something to wait for.
const (
	hookDelay = 2 * time.Second
	appDelay  = 5 * time.Second
)

// actionTimeout bounds each Helm action of a trial (see trials.timeout);
// failing trials (an
// application that never becomes ready) take this long to fail.
const actionTimeout = 20 * time.Second

// failingTimeout is the timeout of an upgrade meant to fail.
const failingTimeout = 8 * time.Second

// cell is one kind of trial: a fault striking one phase of one action
// under one wait strategy.
type cell struct {
	action   string // install, upgrade, rollback, uninstall
	phase    string
	strategy v2.HookWaitStrategy // empty for uninstall
	fault    string
}

// The faults.
const (
	// faultKill is SIGKILL of the controller, started again at once.
	faultKill = "SIGKILL"
	// faultHandover stops the leader of two replicas with SIGTERM, as a
	// rollout does; the standby takes over and a new standby starts.
	faultHandover = "leader handover"
	// faultAPIServer restarts the API server, down for apiServerDown.
	faultAPIServer = "API server restart"
)

// apiServerDown is how long a restarted API server stays away.
const apiServerDown = 3 * time.Second

func (c cell) String() string {
	s := c.action
	if c.strategy != "" {
		s += ", " + string(c.strategy)
	}
	return s + ", " + c.phase + ": " + c.fault
}

// id is a short DNS-safe name for the cell's shard.
func (c cell) id() string {
	r := strings.NewReplacer(" ", "", "-", "", ",", "")
	s := c.action[:3] + "-" + r.Replace(c.phase)
	if c.strategy != "" {
		s += "-" + strings.ToLower(string(c.strategy)[:1])
	}
	switch c.fault {
	case faultHandover:
		s += "-lh"
	case faultAPIServer:
		s += "-api"
	}
	return strings.ToLower(s)
}

// cells lists every trial kind: each phase of install, upgrade and
// rollback under both strategies, remediation after a failed install or
// upgrade, and each phase of uninstall, each with each fault. The short
// suite hands over leadership only where afterHooks differs from Helm (the
// post hooks and the readiness wait of installs and upgrades) and where
// this controller does more than Helm (the hook cleanup).
func cells() []cell {
	var out []cell
	for _, c := range phaseCells() {
		c.fault = faultKill
		out = append(out, c)
		c.fault = faultHandover
		if full || ((c.action == "install" || c.action == "upgrade") && (c.phase == phasePostHooks || c.phase == phaseWait)) ||
			c.phase == phaseHookCleanup {
			out = append(out, c)
		}
	}
	return out
}

// apiServerCells are the trials of API server restarts: every phase.
func apiServerCells() []cell {
	var out []cell
	for _, c := range phaseCells() {
		c.fault = faultAPIServer
		out = append(out, c)
	}
	return out
}

func phaseCells() []cell {
	var out []cell
	for _, s := range []v2.HookWaitStrategy{v2.AfterHooks, v2.BeforeHooks} {
		for _, a := range []string{"install", "upgrade", "rollback"} {
			for _, p := range []string{phasePreHooks, phaseApply, phasePostHooks, phaseWait, phaseCommit} {
				out = append(out, cell{action: a, phase: p, strategy: s})
			}
		}
		out = append(out, cell{action: "install", phase: phaseRemediation, strategy: s},
			cell{action: "upgrade", phase: phaseRemediation, strategy: s})
	}
	for _, p := range []string{phaseDeleteHook, phaseDelete, phaseCommit, phaseHookCleanup} {
		out = append(out, cell{action: "uninstall", phase: p})
	}
	return out
}

// trace prints every request of a trial's controller (RELIABILITY_TRACE=1).
var trace = os.Getenv("RELIABILITY_TRACE") != ""

// killsPerPhase is how many SIGKILLs each cell gets.
func killsPerPhase() int {
	if n, err := strconv.Atoi(os.Getenv("RELIABILITY_KILLS")); err == nil && n > 0 {
		return n
	}
	if full {
		return 10
	}
	return 2
}

// parallelCells is how many cells run at once; each has its own
// controller, and most of a trial is waiting for hooks and pods.
// RELIABILITY_PARALLEL overrides it.
func parallelCells() int {
	if n, err := strconv.Atoi(os.Getenv("RELIABILITY_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 6
}

// TestFaults strikes the controller at randomised moments inside every
// phase of an install, an upgrade, a rollback and an uninstall, with both
// wait strategies: SIGKILL and a restart, or a leader handover between two
// replicas. It checks the invariants on every run:
//
//   - no release left pending or stuck;
//   - no revision lost from history;
//   - no hook run again once the readiness wait had begun;
//   - no remediation or uninstall caused by the fault;
//   - Ready true only when the workloads are ready;
//   - the failure counters as in the same trial without a fault.
func TestFaults(t *testing.T) {
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.LeaseNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the lease namespace: %v", err)
	}
	runCells(t, cells(), parallelCells())
}

// TestFaultsAPIServerRestart restarts the API server in the middle of each
// phase, with the invariants of TestFaults. There is one API server, so
// the trials run one after the other, and the rest of the suite (the
// shared controller, source-controller) lives through every restart too.
//
// Full suite only: after a restart the cluster's own controllers (the Job
// controller, kwok, the workload simulator) take a while to act again, and
// one short run in eight saw a hook Job not complete within two minutes of
// the restart, which is not yet explained (see docs/reliability.md).
func TestFaultsAPIServerRestart(t *testing.T) {
	if !full {
		t.Skip("API server restarts run in the full suite (make reliability)")
	}
	runCells(t, apiServerCells(), 1)
}

// runCells runs the trials of the cells, parallel at a time, and records
// a row for each.
func runCells(t *testing.T, all []cell, parallel int) {
	seed := trialSeed(t, "kill moments")
	runTrials(t, selectCells(all), parallel, func(i int, c cell) row {
		tr := &trials{cell: c, rand: rand.New(rand.NewPCG(seed, uint64(i)))}
		began := time.Now()
		r := tr.runCell(t)
		t.Logf("%s: %d runs, %d broke, in %s", c, r.Runs, len(r.Failures), time.Since(began).Round(time.Second))
		return r
	})
}

// trials runs the kills of one cell against a controller of its own,
// reached through a proxy that shows every request it makes.
type trials struct {
	cell  cell
	ns    string
	repo  string
	chart chartserver.ChartRef
	rand  *rand.Rand

	ctl   *framework.Controller
	proxy *framework.Proxy
	// hr is the release upgrades and rollbacks reuse across runs.
	hr *v2.HelmRelease
	// baseline is the end state of the cell's trial without a fault.
	baseline *endState
	// stopped is the replica a handover stopped.
	stopped int
	// rivalChart is the hook-rival chart (hook cleanup cells).
	rivalChart chartserver.ChartRef
}

// endState is what a settled release looks like, for comparing a trial
// with a fault to one without.
type endState struct {
	readyStatus             metav1.ConditionStatus
	readyReason             string
	failures, install, upgr int64
	remediations            int
}

func (s endState) String() string {
	return fmt.Sprintf("Ready=%s/%s, failures %d (install %d, upgrade %d), remediations %d",
		s.readyStatus, s.readyReason, s.failures, s.install, s.upgr, s.remediations)
}

// runCell starts the cell's controller, runs its trials and returns its
// row. It fails t only for set-up errors; broken invariants go in the row.
func (tr *trials) runCell(t *testing.T) row {
	r := row{Section: "Faults", Case: tr.cell.String()}
	// Each cell has a namespace of its own, so that release names repeat
	// across cells.
	tr.ns = env.Namespace(t)
	tr.repo = env.HelmRepository(t, tr.ns).Name
	tr.chart = env.PublishChart(t, faultChart, "0.1.0", tr.ns)
	if tr.cell.phase == phaseHookCleanup {
		tr.rivalChart = env.PublishChart(t, hookRivalChart, "0.1.0", tr.ns)
	}
	tr.proxy = env.StartProxy(t)
	handover := tr.cell.fault == faultHandover
	ctl, err := framework.StartController(framework.ControllerOptions{
		Binary: env.Binary, Kubeconfig: tr.proxy.Kubeconfig, LogDir: trialLogDir(t),
		Shard:          "fault-" + tr.cell.id() + "-" + utilrand.String(4),
		LeaderElection: handover,
	})
	if err != nil {
		r.Runs, r.Failures = 1, append(r.Failures, "set-up: "+err.Error())
		return r
	}
	tr.ctl = ctl
	if handover {
		if _, err := ctl.StartReplica(); err != nil {
			r.Failures = append(r.Failures, "set-up: "+err.Error())
			return r
		}
	}
	defer tr.cleanup()

	if err := tr.prepare(); err != nil {
		r.Runs, r.Failures = 1, append(r.Failures, "set-up: "+err.Error())
		return r
	}
	var delays, recoveries []time.Duration
	for i := range tr.runs() {
		r.Runs++
		out := tr.runOnce(i)
		if len(out.broken) > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("run %d (struck %s into the phase): %s", i+1, out.killAfter.Round(time.Millisecond), strings.Join(out.broken, "; ")))
		}
		r.Known = append(r.Known, out.known...)
		if len(out.broken) > 0 {
			tr.dumpLogs(t, i, out.broken)
			// Later runs build on this one's release; start over.
			if err := tr.recover(); err != nil {
				r.Failures = append(r.Failures, fmt.Sprintf("after run %d: %v", i+1, err))
				break
			}
		}
		delays = append(delays, out.killAfter)
		recoveries = append(recoveries, out.recovery)
	}
	r.Note = fmt.Sprintf("struck %s into the phase; settled %s after", spread(delays), spread(recoveries))
	if tr.baseline != nil {
		r.Note += "; end state as without the fault: " + tr.baseline.String()
	}
	return r
}

func (tr *trials) dumpLogs(t *testing.T, run int, broken []string) {
	var b strings.Builder
	tr.ctl.DumpLogs(&b, 40)
	t.Logf("%s, run %d broke %s; controller logs:\n%s", tr.cell, run+1, strings.Join(broken, "; "), b.String())
}

func (tr *trials) cleanup() {
	if tr.ctl.Running() != nil {
		_ = tr.ctl.Start()
	}
	cleanupShard(tr.ctl, tr.ns)
}

// timeout is the timeout of an action meant to succeed. An API server
// restart stops the whole cluster for a while (the workloads' controllers
// reconnect too), so its trials get the margin a real timeout has: the
// suite tests the controller, not how fast the cluster recovers.
func (tr *trials) timeout() time.Duration {
	if tr.cell.fault == faultAPIServer {
		return 2 * time.Minute
	}
	return actionTimeout
}

// release returns a HelmRelease of the fault chart in the cell's shard.
func (tr *trials) release(name, values string) *v2.HelmRelease {
	hr := framework.Release(tr.ns, name, tr.repo, tr.chart.Name, tr.chart.Version, values)
	framework.Sharded(hr, tr.ctl)
	unlimited := 0
	hr.Spec.MaxHistory = &unlimited
	hr.Spec.Timeout = &metav1.Duration{Duration: tr.timeout()}
	yes := true
	hr.Spec.Install = &v2.Install{
		Install: helmv2.Install{
			// Retries, so that a fault wrongly counted as a failure
			// shows as a remediation.
			Remediation: &helmv2.InstallRemediation{Retries: 3},
		},
		WaitStrategy: tr.cell.strategy,
	}
	hr.Spec.Upgrade = &v2.Upgrade{
		Upgrade:      helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 3}},
		WaitStrategy: tr.cell.strategy,
	}
	// Remediations are meant to succeed: they get the timeout of an
	// action meant to succeed even where spec.timeout is the failing
	// upgrade's or install's (an API server restart during a remediation
	// otherwise outlasts that short timeout on the cluster's recovery).
	hr.Spec.Rollback = &v2.Rollback{
		Rollback:     helmv2.Rollback{Timeout: &metav1.Duration{Duration: tr.timeout()}},
		WaitStrategy: tr.cell.strategy,
	}
	hr.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{Timeout: &metav1.Duration{Duration: tr.timeout()}},
		DeleteHookResources: tr.cell.phase == phaseHookCleanup}
	if tr.cell.action == "install" && tr.cell.phase == phaseRemediation {
		// One failed install, remediated by uninstalling, then stop.
		hr.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 0, RemediateLastFailure: &yes}
	}
	if tr.cell.action == "rollback" || (tr.cell.action == "upgrade" && tr.cell.phase == phaseRemediation) {
		// One failed upgrade, remediated by rolling back, then stop.
		hr.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: &yes}
	}
	return hr
}

func appValues(message string, fail bool) string {
	return fmt.Sprintf(`{"message":%q,"appFail":%t,"preHookDelay":%q,"postHookDelay":%q,"deleteHookDelay":%q,"appDelay":%q}`,
		message, fail, hookDelay, hookDelay, hookDelay, appDelay)
}

// prepare installs the release later runs upgrade or roll back, and runs
// the cell's trial once without a fault where the end state is not simply
// "deployed and Ready".
func (tr *trials) prepare() error {
	switch tr.cell.action {
	case "upgrade", "rollback":
		tr.hr = tr.release("app", appValues("v0", false))
		if err := env.Client.Create(context.Background(), tr.hr); err != nil {
			return err
		}
		if err := tr.settle(tr.hr, func(hr *v2.HelmRelease) error {
			return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		}); err != nil {
			return fmt.Errorf("first install: %w", err)
		}
	}
	if !tr.failing() {
		return nil
	}
	out := tr.runOnce(-1)
	if len(out.broken) > 0 {
		return fmt.Errorf("the trial without a fault: %s", strings.Join(out.broken, "; "))
	}
	return nil
}

// failing reports whether the cell's trial fails on purpose (to remediate
// or roll back).
func (tr *trials) failing() bool {
	return tr.cell.action == "rollback" || tr.cell.phase == phaseRemediation
}

// recover brings the shared release back to Ready after a broken run.
func (tr *trials) recover() error {
	if tr.ctl.Running() != nil {
		if err := tr.ctl.Start(); err != nil {
			return err
		}
	}
	if tr.hr == nil {
		return nil
	}
	msg := "recover-" + utilrand.String(4)
	if err := tr.patchValues(appValues(msg, false), tr.timeout()); err != nil {
		return err
	}
	return tr.settle(tr.hr, func(hr *v2.HelmRelease) error {
		return framework.ReleaseReady(hr, framework.ReleaseWant{})
	})
}

func (tr *trials) patchValues(values string, timeout time.Duration) error {
	ctx := context.Background()
	hr := &v2.HelmRelease{}
	// The controller writes the status meanwhile (a new leader starts by
	// patching it): a conflict means reading again, not a broken run.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Get(ctx, hr, tr.hr.Namespace, tr.hr.Name); err != nil {
			return err
		}
		hr.Spec.Values = framework.JSON(values)
		hr.Spec.Timeout = &metav1.Duration{Duration: timeout}
		return env.Client.Update(ctx, hr)
	})
	if err != nil {
		return fmt.Errorf("changing the values: %w", err)
	}
	tr.hr = hr
	return nil
}

// settle polls hr until done returns nil, failing when the controller
// died or two minutes pass.
func (tr *trials) settle(hr *v2.HelmRelease, done func(*v2.HelmRelease) error) error {
	return env.Poll(2*time.Minute, func(ctx context.Context) error {
		if err := tr.ctl.Running(); err != nil {
			return errors.Join(errStop, err)
		}
		if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		return done(hr)
	})
}

var errStop = errors.New("stop")

// outcome is what one run saw.
type outcome struct {
	broken []string
	// known are departures from an invariant the product documents
	// (beforeHooks re-running hooks after an interruption, as Helm and
	// upstream do); they are reported, not failed.
	known     []string
	killAfter time.Duration
	recovery  time.Duration
}

// observed is what the proxy saw during a run.
type observed struct {
	mu sync.Mutex
	// actionBegan is when the action under test began (for a rollback,
	// when its pending revision was written).
	actionBegan time.Time
	// segment is the kind of Helm action running (install, upgrade,
	// rollback, uninstall), from the revisions it writes. A retry after
	// an interruption continues the segment; a remediation starts one.
	segment string
	// waitBegan is the first readiness wait of the segment.
	waitBegan time.Time
	// postAfterWait counts post hooks run after the segment's wait.
	postAfterWait int
	// reruns describes each hook run after its segment's wait began.
	reruns []string
	// fired is closed once the fault struck.
	fired     chan struct{}
	firedOnce sync.Once
	killAfter time.Duration
	killErr   error
}

// runOnce runs one trial: the action, a SIGKILL inside the cell's phase
// (none when run < 0: the baseline), a restart, and the checks.
func (tr *trials) runOnce(run int) outcome {
	var out outcome
	tr.ctl.Mark()
	name, hr, values := tr.begin(run)
	obs := &observed{fired: make(chan struct{})}
	if run < 0 {
		obs.firedOnce.Do(func() { close(obs.fired) })
	}
	stop := tr.proxy.Observe(func(r *http.Request) { tr.watch(r, name, obs, run >= 0) })
	defer stop()
	before := remediationEvents(tr.ns, name)

	if err := tr.act(hr, values); err != nil {
		out.broken = append(out.broken, "starting the action: "+err.Error())
		return out
	}
	select {
	case <-obs.fired:
	case <-time.After(2 * time.Minute):
		out.broken = append(out.broken, "the phase was never reached within 2m (no fault injected)")
		return out
	}
	out.killAfter = obs.killAfter
	if obs.killErr != nil {
		out.broken = append(out.broken, "killing: "+obs.killErr.Error())
		return out
	}
	var storedAtKill []framework.Stored
	if run >= 0 {
		storedAtKill, _ = env.ReadStorage(context.Background(), env.Client, tr.ns, name)
		if err := tr.restart(); err != nil {
			out.broken = append(out.broken, "restarting: "+err.Error())
			return out
		}
	}
	restarted := time.Now()
	end, broken := tr.awaitEnd(name, hr, run)
	out.recovery = time.Since(restarted)
	out.broken = append(out.broken, broken...)
	if end == nil {
		return out
	}
	end.remediations = remediationEvents(tr.ns, name) - before
	if run < 0 {
		tr.baseline = end
		return out
	}
	broken, known := tr.checkInvariants(name, storedAtKill, obs, end)
	out.broken, out.known = append(out.broken, broken...), known
	return out
}

// begin names the release of the run and says what the action changes.
func (tr *trials) begin(run int) (name string, hr *v2.HelmRelease, values string) {
	tag := fmt.Sprintf("r%d", run+1)
	if run < 0 {
		tag = "base"
	}
	switch tr.cell.action {
	case "install":
		hr := tr.release(tag, appValues(tag, tr.cell.phase == phaseRemediation))
		if tr.cell.phase == phaseRemediation {
			hr.Spec.Timeout = &metav1.Duration{Duration: failingTimeout}
		}
		return tag, hr, ""
	case "uninstall":
		if tr.cell.phase == phaseHookCleanup {
			return tag, tr.release(tag, hookCleanupValues(tag)), ""
		}
		return tag, tr.release(tag, appValues(tag, false)), ""
	case "upgrade":
		return tr.hr.Name, tr.hr, appValues(tag, tr.cell.phase == phaseRemediation)
	default: // rollback
		return tr.hr.Name, tr.hr, appValues(tag, true)
	}
}

// act starts the action: creates the release, changes its values, or
// (uninstall) installs it and deletes it.
func (tr *trials) act(hr *v2.HelmRelease, values string) error {
	ctx := context.Background()
	switch tr.cell.action {
	case "install":
		return env.Client.Create(ctx, hr)
	case "uninstall":
		if err := env.Client.Create(ctx, hr); err != nil {
			return err
		}
		if err := tr.settle(hr, func(hr *v2.HelmRelease) error {
			return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		}); err != nil {
			return fmt.Errorf("installing before the uninstall: %w", err)
		}
		if tr.cell.phase == phaseHookCleanup {
			if err := tr.installRival(hr.Name); err != nil {
				return err
			}
		}
		return env.Client.Delete(ctx, hr)
	case "rollback":
		// Back to a good revision first, then the upgrade that fails.
		if err := tr.patchValues(appValues("good-"+utilrand.String(4), false), tr.timeout()); err != nil {
			return err
		}
		if err := tr.settle(tr.hr, func(hr *v2.HelmRelease) error {
			return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason})
		}); err != nil {
			return fmt.Errorf("the good upgrade before the failing one: %w", err)
		}
		return tr.patchValues(values, failingTimeout)
	default:
		timeout := tr.timeout()
		if tr.cell.phase == phaseRemediation {
			timeout = failingTimeout
		}
		return tr.patchValues(values, timeout)
	}
}

// trigger says when the fault strikes: the request that opens the phase
// (after the one that begins the action, if any), and how long after it.
type trigger struct {
	begins func(framework.Call) bool
	opens  func(framework.Call) bool
	// window is how long the phase lasts after it opens; the kill comes
	// at a random moment inside it. Zero: the phase is the request
	// itself, held and dropped, or forwarded with the kill right after.
	window time.Duration
}

func (tr *trials) trigger(name string) trigger {
	job := func(suffix string) func(framework.Call) bool {
		return func(c framework.Call) bool { return c.Writes() && c.Resource == "jobs" && c.Name == name+suffix }
	}
	storage := func(status string) func(framework.Call) bool {
		return func(c framework.Call) bool {
			return c.Writes() && isStorage(c, name) && c.Labels["status"] == status
		}
	}
	var t trigger
	switch tr.cell.phase {
	case phasePreHooks:
		t = trigger{opens: job("-pre"), window: hookDelay}
	case phaseApply:
		t = trigger{opens: func(c framework.Call) bool { return c.Writes() && c.Resource == "deployments" && c.Name == name }}
	case phasePostHooks:
		t = trigger{opens: job("-post"), window: hookDelay}
	case phaseWait:
		t = trigger{opens: func(c framework.Call) bool { return isWait(c, name) }, window: time.Second}
	case phaseCommit:
		t = trigger{opens: storage("deployed")}
		if tr.cell.action == "uninstall" {
			t = trigger{opens: func(c framework.Call) bool { return c.Verb == "delete" && isStorage(c, name) }}
		}
	case phaseRemediation:
		if tr.cell.action == "install" {
			t = trigger{opens: storage("uninstalling"), window: hookDelay}
		} else {
			t = trigger{opens: storage("pending-rollback"), window: hookDelay + appDelay}
		}
	case phaseDeleteHook:
		t = trigger{opens: job("-delete"), window: hookDelay}
	case phaseDelete:
		t = trigger{opens: func(c framework.Call) bool {
			return c.Verb == "delete" && c.Resource == "deployments" && c.Name == name
		}}
	case phaseHookCleanup:
		// Once Helm's part recorded the release uninstalled (with
		// deleteHookResources the records stay until the cleanup is over),
		// the first deletion of a hook Job opens the cleanup.
		t = trigger{
			begins: storage("uninstalled"),
			opens: func(c framework.Call) bool {
				return c.Verb == "delete" && c.Resource == "jobs" && strings.HasPrefix(c.Name, name+"-")
			},
		}
	}
	if tr.cell.action == "rollback" {
		t.begins = storage("pending-rollback")
	}
	return t
}

func isStorage(c framework.Call, name string) bool {
	return c.Resource == "secrets" && strings.HasPrefix(c.Name, "sh.helm.release.v1."+name+".v")
}

// isWait matches the readiness wait's list or watch of the application.
func isWait(c framework.Call, name string) bool {
	return (c.Verb == "list" || c.Verb == "watch") && c.Resource == "deployments" &&
		strings.Contains(c.FieldSelector, "metadata.name="+name)
}

// watch is the proxy observer of a run: it records hooks and waits, and
// strikes when the phase opens.
func (tr *trials) watch(r *http.Request, name string, obs *observed, strike bool) {
	c := framework.ParseCall(r)
	if c.Namespace != tr.ns {
		return
	}
	if trace {
		fmt.Fprintf(os.Stderr, "%s %s: %s %s %s %s status=%s\n", time.Now().Format("15:04:05.000"), tr.cell.id(), c.Verb, c.Resource, c.Name, c.FieldSelector, c.Labels["status"])
	}
	t := tr.trigger(name)
	now := time.Now()
	obs.mu.Lock()
	if obs.actionBegan.IsZero() && (t.begins == nil || t.begins(c)) {
		obs.actionBegan = now
	}
	began := !obs.actionBegan.IsZero()
	if began {
		obs.record(c, name, tr.cell.strategy, now)
	}
	fire := false
	select {
	case <-obs.fired:
	default:
		fire = strike && began && t.opens(c)
	}
	obs.mu.Unlock()
	if !fire {
		return
	}
	obs.firedOnce.Do(func() {
		if t.window == 0 && tr.cell.fault == faultKill && tr.rand.IntN(2) == 0 {
			// Hold the request and kill: it never reaches the API server
			// (the proxy drops a request whose client went away; give
			// the closed connection a moment to show).
			obs.killErr = tr.strike()
			time.Sleep(100 * time.Millisecond)
		} else {
			wait := time.Duration(tr.rand.Int64N(int64(max(t.window, 300*time.Millisecond))))
			obs.killAfter = wait
			go func() {
				time.Sleep(wait)
				obs.killErr = tr.strike()
				close(obs.fired)
			}()
			return
		}
		close(obs.fired)
	})
}

// runs is how many times the cell's fault strikes: every kill count for
// SIGKILL, fewer for the slower faults.
func (tr *trials) runs() int {
	switch {
	case tr.cell.fault == faultKill:
		return killsPerPhase()
	case !full:
		return 1
	case tr.cell.fault == faultAPIServer:
		// Each restart stops the whole cluster and its cells run one at a
		// time (~1 min a run on 2 vCPUs): three per cell made the full
		// suite ~3.5 h. One restart in every phase of every action.
		return 1
	default:
		return 3
	}
}

// strike injects the cell's fault.
func (tr *trials) strike() error {
	switch tr.cell.fault {
	case faultKill:
		return tr.ctl.Kill()
	case faultAPIServer:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return env.Cluster.RestartAPIServer(ctx, apiServerDown)
	}
	leader, err := tr.leader()
	if err != nil {
		return err
	}
	tr.stopped = leader
	return tr.ctl.StopReplica(leader)
}

// restart brings the controller back after a strike: a new process after
// a kill, a new standby after a handover (the old standby leads now).
func (tr *trials) restart() error {
	switch tr.cell.fault {
	case faultKill:
		return tr.ctl.Start()
	case faultAPIServer:
		return nil // the controller lives through it
	}
	_, err := tr.ctl.StartReplica()
	return err
}

// leader finds the replica that holds the lease, from its metrics.
func (tr *trials) leader() (int, error) {
	for i := range tr.ctl.Replicas() {
		if tr.ctl.ReplicaRunning(i) != nil {
			continue
		}
		v, ok, err := framework.MetricValue(framework.ScrapeURL(tr.ctl.ReplicaMetricsURL(i)), "leader_election_master_status")
		if err == nil && ok && v > 0 {
			return i, nil
		}
	}
	return 0, errors.New("no replica holds the lease")
}

// record follows the run's Helm actions through their requests: which
// action runs, when its readiness wait begins, and which hooks run after
// that. Called with obs.mu held.
func (obs *observed) record(c framework.Call, name string, strategy v2.HookWaitStrategy, now time.Time) {
	switch {
	case c.Writes() && isStorage(c, name):
		kind, pending := strings.CutPrefix(c.Labels["status"], "pending-")
		if c.Labels["status"] == "uninstalling" {
			kind, pending = "uninstall", true
		}
		if pending && kind != obs.segment {
			obs.segment, obs.waitBegan, obs.postAfterWait = kind, time.Time{}, 0
		}
	case isWait(c, name):
		if obs.waitBegan.IsZero() {
			obs.waitBegan = now
		}
	case c.Writes() && c.Resource == "jobs" && strings.HasPrefix(c.Name, name+"-"):
		if obs.waitBegan.IsZero() {
			return
		}
		if strategy == v2.BeforeHooks && strings.HasSuffix(c.Name, "-post") && obs.postAfterWait == 0 {
			obs.postAfterWait++ // beforeHooks runs the post hooks after the wait
			return
		}
		obs.reruns = append(obs.reruns, fmt.Sprintf("hook %s ran again during the %s after its readiness wait had begun", c.Name, obs.segment))
	}
}

// awaitEnd waits until the run's release settled and checks, at every
// look, that Ready is never True while the application is not ready.
func (tr *trials) awaitEnd(name string, hr *v2.HelmRelease, run int) (*endState, []string) {
	var broken []string
	if tr.cell.action == "uninstall" {
		err := env.Poll(2*time.Minute, func(ctx context.Context) error {
			if err := env.Gone(ctx, &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: tr.ns, Name: name}}); err != nil {
				return err
			}
			if stored, err := env.ReadStorage(ctx, env.Client, tr.ns, name); err != nil || len(stored) > 0 {
				return fmt.Errorf("Helm storage %s left (%v)", framework.Describe(stored), err)
			}
			if err := env.Gone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: tr.ns, Name: name}}); err != nil {
				return err
			}
			if tr.cell.phase == phaseHookCleanup {
				return hookObjectsGone(ctx, tr.ns, name)
			}
			return nil
		})
		if err != nil {
			return nil, []string{"stuck: uninstall did not finish: " + err.Error()}
		}
		if tr.cell.phase == phaseHookCleanup {
			return &endState{}, hookObjectsKept(context.Background(), tr.ns, name)
		}
		return &endState{}, nil
	}

	want := tr.wantEnd()
	var stableSince time.Time
	var last string
	err := env.Poll(3*time.Minute, func(ctx context.Context) error {
		if err := tr.ctl.Running(); err != nil {
			return err
		}
		cur := &v2.HelmRelease{}
		if err := env.Get(ctx, cur, tr.ns, name); err != nil {
			return err
		}
		if lie := tr.readyLie(ctx, cur); lie != "" && !slices.Contains(broken, lie) {
			broken = append(broken, lie)
		}
		stored, err := env.ReadStorage(ctx, env.Client, tr.ns, name)
		if err != nil {
			return err
		}
		if err := settled(cur, stored); err != nil {
			stableSince = time.Time{}
			return err
		}
		if err := want(cur); err != nil {
			stableSince = time.Time{}
			return err
		}
		// A failing trial passes through states that look final; the
		// end is the state that stays.
		state := conditionOf(cur)
		if state != last || stableSince.IsZero() {
			last, stableSince = state, time.Now()
		}
		if time.Since(stableSince) < 3*time.Second && tr.failing() {
			return fmt.Errorf("%s for less than 3s", state)
		}
		*hr = *cur
		return nil
	})
	if err != nil {
		return nil, append(broken, "stuck: "+err.Error())
	}
	ready := conditions.Get(hr, meta.ReadyCondition)
	return &endState{
		readyStatus: ready.Status, readyReason: ready.Reason,
		failures: hr.Status.Failures, install: hr.Status.InstallFailures, upgr: hr.Status.UpgradeFailures,
	}, broken
}

func conditionOf(hr *v2.HelmRelease) string {
	c := conditions.Get(hr, meta.ReadyCondition)
	if c == nil {
		return "no Ready"
	}
	return string(c.Status) + "/" + c.Reason
}

// settled returns nil once hr's current generation has been attempted and
// Helm storage holds no revision in flight.
func settled(hr *v2.HelmRelease, stored []framework.Stored) error {
	if hr.Status.LastAttemptedGeneration != hr.Generation || hr.Status.ObservedGeneration != hr.Generation {
		return fmt.Errorf("generation %d, observed %d, last attempted %d", hr.Generation, hr.Status.ObservedGeneration, hr.Status.LastAttemptedGeneration)
	}
	for _, s := range stored {
		if st := s.Status(); strings.HasPrefix(st, "pending") || st == "uninstalling" {
			return fmt.Errorf("Helm storage %s has a revision in flight", framework.Describe(stored))
		}
	}
	if conditions.IsReconciling(hr) {
		return errors.New("still reconciling")
	}
	return nil
}

// wantEnd is the end state of the cell's trial: Ready after a successful
// action, or the baseline's Ready for trials that fail on purpose.
func (tr *trials) wantEnd() func(*v2.HelmRelease) error {
	if tr.failing() {
		return func(hr *v2.HelmRelease) error {
			c := conditions.Get(hr, meta.ReadyCondition)
			if c == nil {
				return errors.New("no Ready condition")
			}
			if tr.baseline != nil && (c.Status != tr.baseline.readyStatus || c.Reason != tr.baseline.readyReason) {
				return fmt.Errorf("Ready=%s/%s, the trial without a fault ended Ready=%s/%s",
					c.Status, c.Reason, tr.baseline.readyStatus, tr.baseline.readyReason)
			}
			if tr.baseline == nil && !conditions.IsStalled(hr) && c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready=%s/%s, not stalled yet", c.Status, c.Reason)
			}
			return nil
		}
	}
	if tr.cell.action != "install" {
		return func(hr *v2.HelmRelease) error {
			return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason})
		}
	}
	// An install the fault left failed (a pending install the restart
	// unlocked, a held afterHooks install) is retried with an upgrade over
	// it, as upstream retries a failed release; one the fault did not
	// interrupt ends installed.
	return func(hr *v2.HelmRelease) error {
		installed := framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		if installed == nil {
			return nil
		}
		if framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason}) == nil {
			return nil
		}
		return installed
	}
}

// readyLie returns a description when hr says Ready for its generation
// while its application is not ready.
func (tr *trials) readyLie(ctx context.Context, hr *v2.HelmRelease) string {
	if hr.Status.ObservedGeneration != hr.Generation || !conditions.IsReady(hr) {
		return ""
	}
	// Only a Deployment read and found not ready is a lie; a read that
	// failed (throttled at the end of a long poll) proves nothing.
	if err := env.DeploymentReady(ctx, tr.ns, hr.Name); errors.Is(err, framework.ErrNotReady) {
		return "Ready=True while the application is not ready: " + err.Error()
	}
	return ""
}

// checkInvariants compares a run's end with its start and its baseline.
func (tr *trials) checkInvariants(name string, atKill []framework.Stored, obs *observed, end *endState) (broken, known []string) {
	if tr.cell.action == "uninstall" {
		return nil, nil
	}
	stored, err := env.ReadStorage(context.Background(), env.Client, tr.ns, name)
	if err != nil {
		return []string{err.Error()}, nil
	}
	// No revision lost: everything there at the kill is still there, and
	// the history has no gap.
	have := map[int]bool{}
	for _, s := range stored {
		have[s.Release.Version] = true
	}
	if tr.cell.action == "install" && tr.cell.phase == phaseRemediation {
		// Remediation uninstalls the failed install and its history.
		if len(stored) > 0 {
			broken = append(broken, "the remediating uninstall left Helm storage "+framework.Describe(stored))
		}
		atKill = nil
	}
	for _, s := range atKill {
		if !have[s.Release.Version] {
			broken = append(broken, fmt.Sprintf("revision lost: v%d (%s at the kill) is gone; storage now %s", s.Release.Version, s.Status(), framework.Describe(stored)))
		}
	}
	for i, s := range stored {
		if s.Release.Version != i+1 {
			broken = append(broken, "history has a gap: "+framework.Describe(stored))
			break
		}
	}
	// No hook run again once the readiness wait had begun.
	obs.mu.Lock()
	if tr.cell.strategy == v2.BeforeHooks && len(obs.reruns) > 0 {
		// Helm's order, kept by beforeHooks: a revision interrupted after
		// its wait began is unlocked and the action retried from its pre
		// hooks, as upstream helm-controller does. Only afterHooks holds
		// the revision for its wait and resumes it.
		known = append(known, "hooks re-run after the readiness wait began (beforeHooks: the interrupted action is retried from its pre hooks, as in Helm and upstream)")
	} else {
		broken = append(broken, obs.reruns...)
	}
	obs.mu.Unlock()
	// No remediation or uninstall caused by the fault, and failure
	// counters as without it.
	want := endState{readyStatus: metav1.ConditionTrue}
	if tr.baseline != nil {
		want = *tr.baseline
	}
	if end.remediations != want.remediations {
		broken = append(broken, fmt.Sprintf("%d rollback/uninstall event(s), the trial without a fault has %d", end.remediations, want.remediations))
	}
	if end.failures != want.failures || end.install != want.install || end.upgr != want.upgr {
		broken = append(broken, fmt.Sprintf("failure counters: %s, without the fault: %s", end, want))
	}
	return broken, known
}

// spread is "min–max" of durations.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	lo, hi := slices.Min(ds), slices.Max(ds)
	return fmt.Sprintf("%s–%s", lo.Round(100*time.Millisecond), hi.Round(100*time.Millisecond))
}

// nopTB lets error-returning code use helpers that take a testing.TB; a
// failure there panics with its message, as nothing could report it.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                           {}
func (nopTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (nopTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// trialLogDir is where a trial's controllers log: a test directory, or
// one under the kept cluster directory (TEST_CLUSTER_KEEP_DIR) so that a
// broken run can be read afterwards.
func trialLogDir(t *testing.T) string {
	if os.Getenv("TEST_CLUSTER_KEEP_DIR") == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(env.WorkDir, "trial-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("trial logs kept in %s", dir)
	return dir
}
