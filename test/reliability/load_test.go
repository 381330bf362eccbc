package reliability

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// reconcileErrors is the controller's count of reconciles that returned an
// error.
const reconcileErrors = `controller_runtime_reconcile_errors_total{controller="helmrelease"}`

// roundAnnotation is the pod annotation the values change sets.
const roundAnnotation = "load.afterhooks.io/round"

// TestLoad creates a fleet of HelmReleases at once (50, 500 with
// RELIABILITY=full), half of them afterHooks and half beforeHooks, a tenth
// with post-install/post-upgrade hooks, and wants every one Ready with
// nothing gone wrong on the way: every Deployment ready, exactly the
// expected revisions in Helm storage, each hook run exactly once, no
// failure counted, no Warning event, no reconcile error. Then it changes a
// value of every release and wants the same after the upgrades; then it
// deletes them all and wants each uninstalled, again without a Warning
// event or a reconcile error.
//
// The fleet has a controller of its own (a shard) at the default
// --concurrent, so that CPU time, peak memory and reconcile errors are the
// load's alone. The test is not parallel: Go runs it before the parallel
// tests of the package, so nothing else in the suite competes with it.
func TestLoad(t *testing.T) {
	n := 50
	if full {
		n = 500
	}
	l := newLoad(t, n)
	l.install()
	if l.dead {
		return
	}
	l.valuesChange()
	if l.dead {
		return
	}
	l.deleteAll()
}

// loadRelease is one release of the fleet.
type loadRelease struct {
	name     string
	strategy v2.HookWaitStrategy
	// secretHook: the crash-afterhooks chart, whose application needs
	// the Secret its hook creates; otherwise podinfo.
	secretHook bool
	// installHook and upgradeHook name the hook Jobs the release runs at
	// install and at each upgrade; empty for a release without hooks.
	installHook, upgradeHook string
}

// hooked says whether the release runs hooks.
func (r loadRelease) hooked() bool { return r.installHook != "" }

// wantHookRuns is how many times each hook Job must have run after the
// install (round 1) or the values change (round 2).
func (r loadRelease) wantHookRuns(round int) map[string]int {
	switch {
	case !r.hooked():
		return nil
	case r.installHook == r.upgradeHook:
		return map[string]int{r.installHook: round}
	case round == 1:
		return map[string]int{r.installHook: 1}
	default:
		return map[string]int{r.installHook: 1, r.upgradeHook: 1}
	}
}

type load struct {
	t     *testing.T
	ns    string
	ctl   *framework.Controller
	jobs  *framework.JobRecorder
	fleet []loadRelease
	// repo is the HelmRepository of both charts.
	repo string
	// hooksChart is crash-afterhooks, published for this test.
	hooksChart   string
	hooksVersion string

	// What the previous phases left, so that each phase counts its own.
	warningsSeen  map[types.UID]int32
	logErrorsSeen int
	errorsMetric  float64
	// dead is set when the controller or the cluster is gone, so that a
	// second phase would tell nothing new.
	dead bool
}

// newLoad sets up the namespace, the repository, the charts and the shard
// controller, and defines the fleet:
//
//   - even releases are afterHooks, odd ones beforeHooks (install and
//     upgrade alike);
//   - releases 0, 20, 40, … (afterHooks) are crash-afterhooks, whose
//     application mounts a Secret that only its post-install/post-upgrade
//     hook Job creates: under beforeHooks it would never become ready;
//   - releases 11, 31, 51, … (beforeHooks) are podinfo with its own
//     post-install and post-upgrade hook Jobs enabled;
//   - the rest are plain podinfo.
//
// So one release in ten runs hooks, half of them under each strategy.
func newLoad(t *testing.T, n int) *load {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hooks := env.PublishChart(t, "crash-afterhooks", "0.1.0", ns)
	l := &load{t: t, ns: ns, repo: repo.Name, hooksChart: hooks.Name, hooksVersion: hooks.Version, warningsSeen: map[types.UID]int32{}}
	for i := range n {
		r := loadRelease{name: fmt.Sprintf("podinfo-%d", i), strategy: v2.BeforeHooks}
		if i%2 == 0 {
			r.strategy = v2.AfterHooks
		}
		switch i % 20 {
		case 0:
			r.name, r.secretHook = fmt.Sprintf("hooks-%d", i), true
			r.installHook, r.upgradeHook = r.name+"-create-creds", r.name+"-create-creds"
		case 11:
			r.installHook, r.upgradeHook = r.name+"-post-install", r.name+"-post-upgrade"
		}
		l.fleet = append(l.fleet, r)
	}

	// --log-level=info as deployed (the framework's debug default costs
	// CPU the load should not be charged); --concurrent stays at its
	// default, 4, as upstream's.
	l.ctl = env.StartShard(t, ns, framework.ControllerOptions{
		Shard: "load-" + rand.String(6),
		Args:  []string{"--log-level=info"},
	})
	framework.LogsOnFailure(t, l.ctl)
	// Registered after StartShard, so it runs first: StartShard's own
	// cleanup gives the controller 30 s, too little for hundreds of
	// uninstalls.
	t.Cleanup(l.uninstall)
	l.jobs = env.RecordJobs(t, ns)

	env.Eventually(t, time.Minute, "HelmRepository Ready", func(ctx context.Context) error {
		if err := env.Get(ctx, repo, ns, repo.Name); err != nil {
			return err
		}
		return framework.Condition(repo, meta.ReadyCondition, metav1.ConditionTrue, "")
	})
	// The controller exposes its reconcile metrics once its controller
	// runs: from here on its CPU time is the load's.
	env.Eventually(t, time.Minute, "the load controller serving metrics", func(ctx context.Context) error {
		v, err := scrapeMetric(ctx, l.ctl.MetricsURL(), reconcileErrors)
		l.errorsMetric = v
		return err
	})
	return l
}

// release is the HelmRelease of r, in the shard of the load controller.
func (l *load) release(r loadRelease) *v2.HelmRelease {
	var hr *v2.HelmRelease
	switch {
	case r.secretHook:
		hr = framework.Release(l.ns, r.name, l.repo, l.hooksChart, l.hooksVersion, `{"hookDelay":"1s"}`)
	case r.hooked():
		hr = env.PodinfoRelease(l.ns, r.name, l.repo,
			`{"hooks":{"postInstall":{"job":{"enabled":true}},"postUpgrade":{"job":{"enabled":true}}}}`)
	default:
		hr = env.PodinfoRelease(l.ns, r.name, l.repo, "")
	}
	hr.Spec.Install = &v2.Install{WaitStrategy: r.strategy}
	hr.Spec.Upgrade = &v2.Upgrade{WaitStrategy: r.strategy}
	return framework.Sharded(hr, l.ctl)
}

func (l *load) names() []string {
	out := make([]string, len(l.fleet))
	for i, r := range l.fleet {
		out[i] = r.name
	}
	return out
}

// phaseTimeout: a few seconds per release on a small machine, never less
// than five minutes.
func (l *load) phaseTimeout() time.Duration {
	return max(5*time.Minute, time.Duration(len(l.fleet))*2*time.Second)
}

// install creates the fleet at once and checks it.
func (l *load) install() {
	n := len(l.fleet)
	want := framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1}
	l.phase(phase{
		name:  fmt.Sprintf("install %d releases (mixed strategies, %d with hooks)", n, l.hooked()),
		round: 1,
		write: func(ctx context.Context) error {
			return framework.ForEach(ctx, n, func(ctx context.Context, i int) error {
				if err := env.Client.Create(ctx, l.release(l.fleet[i])); err != nil {
					return fmt.Errorf("creating HelmRelease %s: %w", l.fleet[i].name, err)
				}
				return nil
			})
		},
		wait:   framework.FleetWait{Check: func(hr *v2.HelmRelease) error { return framework.ReleaseReady(hr, want) }},
		checks: []check{l.checkStatus, l.checkDeployments, l.checkStorage, l.checkWarnings, l.checkHooks},
	})
}

// valuesChange sets a pod annotation through the values of every release,
// which upgrades each to revision 2 and rolls its pods.
func (l *load) valuesChange() {
	patch := fmt.Appendf(nil, `{"spec":{"values":{"podAnnotations":{%q:"2"}}}}`, roundAnnotation)
	want := framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2}
	l.phase(phase{
		name:  fmt.Sprintf("values change on all %d", len(l.fleet)),
		round: 2,
		write: func(ctx context.Context) error {
			return framework.ForEach(ctx, len(l.fleet), func(ctx context.Context, i int) error {
				hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: l.fleet[i].name, Namespace: l.ns}}
				if err := env.Client.Patch(ctx, hr, client.RawPatch(types.MergePatchType, patch)); err != nil {
					return fmt.Errorf("patching HelmRelease %s: %w", hr.Name, err)
				}
				return nil
			})
		},
		wait:   framework.FleetWait{Check: func(hr *v2.HelmRelease) error { return framework.ReleaseReady(hr, want) }},
		checks: []check{l.checkStatus, l.checkDeployments, l.checkStorage, l.checkWarnings, l.checkHooks},
	})
}

// deleteAll deletes every HelmRelease at once and wants each uninstalled:
// the HelmRelease gone, its Helm storage and its Deployment too.
func (l *load) deleteAll() {
	l.phase(phase{
		name: fmt.Sprintf("delete all %d", len(l.fleet)),
		write: func(ctx context.Context) error {
			return env.Client.DeleteAllOf(ctx, &v2.HelmRelease{}, client.InNamespace(l.ns))
		},
		wait:   framework.FleetWait{Gone: true},
		checks: []check{l.checkUninstalled, l.checkWarnings},
	})
}

func (l *load) hooked() int {
	k := 0
	for _, r := range l.fleet {
		if r.hooked() {
			k++
		}
	}
	return k
}

// check looks at every release after a phase and adds what it finds
// wrong to failures, by release; an error is a check that could not run.
type check func(ctx context.Context, round int, failures map[string][]string) error

// phase is one step of the load: a write to the whole fleet, the wait for
// its outcome, and the checks after it.
type phase struct {
	name string
	// round is the revision the phase makes: 1 for the install, 2 for
	// the values change, 0 for the deletion.
	round  int
	write  func(context.Context) error
	wait   framework.FleetWait
	checks []check
}

// phase runs p, measures it, runs its checks and the reconcile error
// check, and adds the row.
func (l *load) phase(p phase) {
	t := l.t
	t.Logf("%s: starting", p.name)
	cpu0, _, err := l.ctl.ResourceUsage()
	if err != nil {
		t.Fatalf("reading the controller's CPU time: %v", err)
	}
	began := time.Now()
	if err := p.write(context.Background()); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	w := p.wait
	w.Namespace, w.Names, w.Timeout, w.Controller = l.ns, l.names(), l.phaseTimeout(), l.ctl
	w.Log = func(format string, args ...any) { t.Logf(p.name+": "+format, args...) }
	_, pending, waitErr := env.WaitFleet(w)
	took := time.Since(began)
	cpu1, peakKiB, usageErr := l.ctl.ResourceUsage()
	if waitErr != nil {
		t.Errorf("%s: %v", p.name, waitErr)
	}
	if l.ctl.Running() != nil || usageErr != nil {
		l.dead = true
	}

	done := "Ready"
	if w.Gone {
		done = "gone"
	}
	failures := map[string][]string{}
	for rel, err := range pending {
		failures[rel] = append(failures[rel], "not "+done+": "+err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var controllerFailures []string
	newErrors := 0
	if !l.dead {
		for _, check := range p.checks {
			if err := check(ctx, p.round, failures); err != nil {
				controllerFailures = append(controllerFailures, err.Error())
			}
		}
		var attributed int
		var err error
		newErrors, attributed, err = l.checkReconcileErrors(ctx, failures)
		if err != nil {
			controllerFailures = append(controllerFailures, err.Error())
		}
		if newErrors > attributed {
			controllerFailures = append(controllerFailures,
				fmt.Sprintf("controller: %d reconcile errors, %d of them in its log", newErrors, attributed))
		}
	} else {
		controllerFailures = append(controllerFailures, fmt.Sprintf("controller: %v", l.ctl.Running()))
	}

	r := row{Section: "Load", Case: p.name, Runs: len(l.fleet)}
	for _, rel := range l.names() {
		if reasons := failures[rel]; len(reasons) > 0 {
			r.Failures = append(r.Failures, truncate(rel+": "+strings.Join(reasons, ", "), 300))
		}
	}
	r.Failures = append(r.Failures, controllerFailures...)
	outcome := fmt.Sprintf("all %s in %s", done, took.Round(100*time.Millisecond))
	if len(pending) > 0 {
		outcome = fmt.Sprintf("%d of %d %s after %s", len(l.fleet)-len(pending), len(l.fleet), done, took.Round(time.Second))
	}
	r.Note = fmt.Sprintf("%s, controller CPU %.1f s, peak RSS %d MiB, %d reconcile errors",
		outcome, (cpu1 - cpu0).Seconds(), peakKiB/1024, newErrors)
	report.add(r)
	t.Logf("%s: %s", p.name, r.Note)
	for _, f := range r.Failures {
		t.Errorf("%s: %s", p.name, f)
	}
}

// checkStatus: no failure counted on any release.
func (l *load) checkStatus(ctx context.Context, _ int, failures map[string][]string) error {
	var list v2.HelmReleaseList
	if err := env.Client.List(ctx, &list, client.InNamespace(l.ns)); err != nil {
		return fmt.Errorf("listing HelmReleases: %w", err)
	}
	for _, hr := range list.Items {
		s := hr.Status
		if s.Failures > 0 || s.InstallFailures > 0 || s.UpgradeFailures > 0 {
			failures[hr.Name] = append(failures[hr.Name], fmt.Sprintf("failures %d, installFailures %d, upgradeFailures %d",
				s.Failures, s.InstallFailures, s.UpgradeFailures))
		}
	}
	return nil
}

// checkDeployments: each release's Deployment is ready and, after the
// values change, carries the new pod annotation.
func (l *load) checkDeployments(ctx context.Context, round int, failures map[string][]string) error {
	var list appsv1.DeploymentList
	if err := env.Client.List(ctx, &list, client.InNamespace(l.ns)); err != nil {
		return fmt.Errorf("listing Deployments: %w", err)
	}
	byName := map[string]appsv1.Deployment{}
	for _, d := range list.Items {
		byName[d.Name] = d
	}
	notReady := make([]error, len(l.fleet))
	err := framework.ForEach(ctx, len(l.fleet), func(ctx context.Context, i int) error {
		notReady[i] = env.DeploymentReady(ctx, l.ns, l.fleet[i].name)
		return nil
	})
	if err != nil {
		return err
	}
	for i, r := range l.fleet {
		if notReady[i] != nil {
			failures[r.name] = append(failures[r.name], notReady[i].Error())
			continue
		}
		if got := byName[r.name].Spec.Template.Annotations[roundAnnotation]; round > 1 && got != fmt.Sprint(round) {
			failures[r.name] = append(failures[r.name], fmt.Sprintf("pod template annotation %s=%q, want %q", roundAnnotation, got, fmt.Sprint(round)))
		}
	}
	return nil
}

// checkStorage: exactly the revisions of the rounds so far, the newest
// deployed and the others superseded.
func (l *load) checkStorage(ctx context.Context, round int, failures map[string][]string) error {
	storage, err := env.ReleasesStorage(ctx, l.ns)
	if err != nil {
		return err
	}
	want := make([]string, round)
	for v := range round {
		want[v] = fmt.Sprintf("v%d superseded", v+1)
	}
	want[round-1] = fmt.Sprintf("v%d deployed", round)
	wantText := "[" + strings.Join(want, ", ") + "]"
	for _, r := range l.fleet {
		if got := framework.Describe(storage[r.name]); got != wantText {
			failures[r.name] = append(failures[r.name], fmt.Sprintf("Helm storage %s, want %s", got, wantText))
		}
	}
	return nil
}

// checkUninstalled: nothing left of the releases, neither Helm storage
// nor a Deployment.
func (l *load) checkUninstalled(ctx context.Context, _ int, failures map[string][]string) error {
	storage, err := env.ReleasesStorage(ctx, l.ns)
	if err != nil {
		return err
	}
	var deployments appsv1.DeploymentList
	if err := env.Client.List(ctx, &deployments, client.InNamespace(l.ns)); err != nil {
		return fmt.Errorf("listing Deployments: %w", err)
	}
	left := map[string]bool{}
	for _, d := range deployments.Items {
		left[d.Name] = true
	}
	for _, r := range l.fleet {
		if stored := storage[r.name]; len(stored) > 0 {
			failures[r.name] = append(failures[r.name], "Helm storage left: "+framework.Describe(stored))
		}
		if left[r.name] {
			failures[r.name] = append(failures[r.name], "Deployment left")
		}
	}
	return nil
}

// checkWarnings: no Warning event on any release since the last phase.
func (l *load) checkWarnings(ctx context.Context, _ int, failures map[string][]string) error {
	warnings, err := env.ReleaseEvents(ctx, l.ns, framework.EventWant{Type: corev1.EventTypeWarning})
	if err != nil {
		return err
	}
	for rel, events := range warnings {
		for _, ev := range events {
			count := max(ev.Count, 1)
			if count > l.warningsSeen[ev.UID] {
				failures[rel] = append(failures[rel], truncate(fmt.Sprintf("Warning %s: %s", ev.Reason, ev.Message), 160))
			}
			l.warningsSeen[ev.UID] = count
		}
	}
	return nil
}

// checkHooks: each hook Job ran exactly once per install or upgrade, and
// succeeded.
func (l *load) checkHooks(_ context.Context, round int, failures map[string][]string) error {
	if err := l.jobs.Err(); err != nil {
		return err
	}
	seen := 0
	defer func() { l.t.Logf("hook Jobs: %d runs seen", seen) }()
	for _, r := range l.fleet {
		for job, want := range r.wantHookRuns(round) {
			runs := l.jobs.Runs(job)
			seen += len(runs)
			if len(runs) != want {
				failures[r.name] = append(failures[r.name], fmt.Sprintf("hook Job %s ran %d times, want %d", job, len(runs), want))
			}
			for _, run := range runs {
				if run.Succeeded < 1 || run.Failed > 0 {
					failures[r.name] = append(failures[r.name], fmt.Sprintf("hook Job %s (created %s): %d succeeded, %d failed",
						job, run.Created.Format(time.TimeOnly), run.Succeeded, run.Failed))
				}
			}
		}
	}
	return nil
}

// checkReconcileErrors reads the controller's reconcile error count and
// puts each "Reconciler error" log line of the phase on its release. It
// returns the errors the metric counted in the phase and how many of them
// the log named.
func (l *load) checkReconcileErrors(ctx context.Context, failures map[string][]string) (counted, attributed int, err error) {
	v, err := scrapeMetric(ctx, l.ctl.MetricsURL(), reconcileErrors)
	if err != nil {
		return 0, 0, err
	}
	counted = int(v - l.errorsMetric)
	l.errorsMetric = v
	logged, err := l.ctl.ReconcilerErrors()
	if err != nil {
		return counted, 0, err
	}
	for _, e := range logged[min(l.logErrorsSeen, len(logged)):] {
		failures[e.Name] = append(failures[e.Name], truncate("reconcile error: "+e.Error, 200))
		attributed++
	}
	l.logErrorsSeen = len(logged)
	return counted, attributed, nil
}

// uninstall is the cleanup after a test that stopped before deleteAll
// did its work: it deletes what is left of the fleet and waits until the
// controller uninstalled it. If it cannot, the finalizers go, so that the
// namespace can: what the releases installed goes with it.
func (l *load) uninstall() {
	t := l.t
	ctx, cancel := context.WithTimeout(context.Background(), l.phaseTimeout())
	defer cancel()
	var left []v2.HelmRelease
	for first := true; ; first = false {
		var list v2.HelmReleaseList
		if err := env.Client.List(ctx, &list, client.InNamespace(l.ns)); err == nil {
			if left = list.Items; len(left) == 0 {
				return
			}
		}
		if first {
			t.Logf("cleanup: deleting the %d HelmReleases left", len(left))
			if err := env.Client.DeleteAllOf(ctx, &v2.HelmRelease{}, client.InNamespace(l.ns)); err != nil {
				t.Errorf("deleting the HelmReleases: %v", err)
			}
		}
		if l.ctl.Running() != nil || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	t.Errorf("cleanup: %d of %d releases not uninstalled (controller: %v); removing their finalizers",
		len(left), len(l.fleet), l.ctl.Running())
	for i := range left {
		hr := &left[i]
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if err := env.Client.Patch(context.Background(), hr, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("removing the finalizers of %s: %v", hr.Name, err)
		}
	}
}

// scrapeMetric reads one metric from url, failing while the page is not
// served or lacks the metric.
func scrapeMetric(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	v, ok, err := framework.MetricValue(string(page), name)
	if err == nil && !ok {
		err = fmt.Errorf("metric %s not exposed", name)
	}
	return v, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
