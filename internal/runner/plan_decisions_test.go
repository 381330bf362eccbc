package runner

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// decided is the part of a plan that the spec and the settings decide.
type decided struct {
	hookOrder     v2.HookWaitStrategy
	helmWait      kube.WaitStrategy
	readiness     kube.WaitStrategy
	waitForJobs   bool
	timeout       time.Duration
	cleanupOnFail bool
	recreate      bool
	ordered       string
}

func decidedOf(p plan.Plan) decided {
	return decided{hookOrder: p.HookOrder, helmWait: p.Wait.Helm, readiness: p.Wait.Readiness, waitForJobs: p.Wait.WaitForJobs,
		timeout: p.Wait.Timeout, cleanupOnFail: p.CleanupOnFail, recreate: p.Recreate != nil, ordered: p.Ordering.From}
}

func testRelease(mutate ...func(*v2.HelmRelease)) *v2.HelmRelease {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}}
	for _, m := range mutate {
		m(obj)
	}
	return obj
}

// Each verb's plan, for the spec and settings combinations that change a
// decision: the hook order, Helm's own wait and the readiness wait, the
// timeout, cleanupOnFail, recreate and ordering.
func TestPlanDecisions(t *testing.T) {
	const poller, legacy, hookOnly = kube.StatusWatcherStrategy, kube.LegacyStrategy, kube.HookOnlyStrategy
	def := plan.DefaultTimeout
	beforeHooks := func(timeout time.Duration) decided {
		return decided{hookOrder: v2.BeforeHooks, helmWait: poller, readiness: poller, waitForJobs: true, timeout: timeout, recreate: true}
	}
	tests := []struct {
		name     string
		obj      *v2.HelmRelease
		settings Settings
		verb     plan.Verb
		want     decided
	}{
		{name: "install by default", obj: testRelease(), verb: plan.Install, want: beforeHooks(def)},
		{name: "upgrade by default", obj: testRelease(), verb: plan.Upgrade, want: beforeHooks(def)},
		{name: "rollback by default", obj: testRelease(), verb: plan.Rollback, want: beforeHooks(def)},
		{name: "uninstall by default", obj: testRelease(), verb: plan.Uninstall,
			want: decided{helmWait: poller, readiness: poller, timeout: def}},
		{name: "test by default", obj: testRelease(), verb: plan.Test, want: decided{timeout: def}},
		{name: "afterHooks by default: Helm waits for its hooks only", obj: testRelease(), verb: plan.Upgrade,
			settings: Settings{DefaultHookOrder: v2.AfterHooks},
			want:     decided{hookOrder: v2.AfterHooks, helmWait: hookOnly, readiness: poller, waitForJobs: true, timeout: def, recreate: true}},
		{name: "an uninstall has no hook order, whatever the default", obj: testRelease(), verb: plan.Uninstall,
			settings: Settings{DefaultHookOrder: v2.AfterHooks},
			want:     decided{helmWait: poller, readiness: poller, timeout: def}},
		{name: "disableWait: beforeHooks and hookOnly, whatever the default", verb: plan.Install,
			obj: testRelease(func(o *v2.HelmRelease) {
				o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true, DisableWaitForJobs: true}}
			}),
			settings: Settings{DefaultHookOrder: v2.AfterHooks},
			want:     decided{hookOrder: v2.BeforeHooks, helmWait: hookOnly, readiness: poller, timeout: def, recreate: true}},
		{name: "uninstall disableWait", verb: plan.Uninstall,
			obj: testRelease(func(o *v2.HelmRelease) {
				o.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{DisableWait: true, Timeout: &metav1.Duration{Duration: time.Second}}}
			}),
			want: decided{helmWait: hookOnly, readiness: poller, timeout: time.Second}},
		{name: "Helm 3 defaults: legacy", obj: testRelease(), verb: plan.Rollback,
			settings: Settings{Config: action.Config{UseHelm3Defaults: true}},
			want:     decided{hookOrder: v2.BeforeHooks, helmWait: legacy, readiness: legacy, waitForJobs: true, timeout: def, recreate: true}},
		{name: "poller named wins over Helm 3 defaults", verb: plan.Install,
			obj:      testRelease(func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: helmv2.WaitStrategyPoller} }),
			settings: Settings{Config: action.Config{UseHelm3Defaults: true}},
			want:     beforeHooks(def)},
		{name: "legacy named", verb: plan.Upgrade,
			obj:  testRelease(func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: helmv2.WaitStrategyLegacy} }),
			want: decided{hookOrder: v2.BeforeHooks, helmWait: legacy, readiness: legacy, waitForJobs: true, timeout: def, recreate: true}},
		{name: "ordered install orders from the spec", verb: plan.Install,
			obj:  testRelease(func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered} }),
			want: func() decided { d := beforeHooks(def); d.ordered = plan.FromSpec; return d }()},
		{name: "an ordered spec does not order a rollback: its revision does", verb: plan.Rollback,
			obj:  testRelease(func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered} }),
			want: beforeHooks(def)},
		{name: "timeouts: the action's over the spec's", verb: plan.Upgrade,
			obj: testRelease(func(o *v2.HelmRelease) {
				o.Spec.Timeout = &metav1.Duration{Duration: time.Hour}
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Timeout: &metav1.Duration{Duration: time.Minute}, CleanupOnFail: true}}
			}),
			want: func() decided { d := beforeHooks(time.Minute); d.cleanupOnFail = true; return d }()},
		{name: "timeouts: the spec's without the action's", verb: plan.Test,
			obj:  testRelease(func(o *v2.HelmRelease) { o.Spec.Timeout = &metav1.Duration{Duration: time.Hour} }),
			want: decided{timeout: time.Hour}},
		{name: "rollback cleanupOnFail and its own wait for jobs", verb: plan.Rollback,
			obj: testRelease(func(o *v2.HelmRelease) {
				o.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{CleanupOnFail: true, DisableWaitForJobs: true}}
			}),
			want: decided{hookOrder: v2.BeforeHooks, helmWait: poller, readiness: poller, timeout: def, cleanupOnFail: true, recreate: true}},
		{name: "install never cleans up on failure", verb: plan.Install,
			obj: testRelease(func(o *v2.HelmRelease) {
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CleanupOnFail: true}}
			}),
			want: beforeHooks(def)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(memoryConfig(), tt.obj, tt.settings)
			if got := decidedOf(r.planFor(tt.verb)); got != tt.want {
				t.Errorf("plan\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// Every plan of a release carries the release's name, its hook marks, the
// controller's readiness timeout per batch and the runner's wait context
// and health check readers; the controller's settings go with each call.
func TestPlanCarriesTheReleaseSettings(t *testing.T) {
	obj := testRelease(func(o *v2.HelmRelease) {
		o.Spec.ReleaseName = "shop"
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
		o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered, ReadinessTimeout: &metav1.Duration{Duration: time.Second}}
	})
	seen := &fakeNewRevision{ctx: t.Context()}
	config := action.Config{AllowDNSLookups: true}
	r := newRunner(memoryConfig(), obj, Settings{Config: config, NewRevision: seen})
	for _, v := range []plan.Verb{plan.Install, plan.Upgrade, plan.Rollback, plan.Uninstall, plan.Test} {
		c := r.call(r.planFor(v))
		p := c.Plan
		if p.Verb != v || p.Release != "shop" || p.HookMarks != action.HookMarks(obj) || p.HookMarks == "" {
			t.Errorf("%s: verb %s, release %q, hook marks %q", v, p.Verb, p.Release, p.HookMarks)
		}
		if p.WaitContext != seen.ctx {
			t.Errorf("%s: the plan's wait context is not the new revision watch's", v)
		}
		if p.Ordering.ReadinessTimeout != time.Second && v != plan.Test {
			t.Errorf("%s: readiness timeout %s, want 1s", v, p.Ordering.ReadinessTimeout)
		}
		if c.Config != config || c.Observer == nil {
			t.Errorf("%s: call config %+v, observer %v", v, c.Config, c.Observer)
		}
	}
	if marks := newRunner(memoryConfig(), testRelease(), Settings{}).planFor(plan.Install).HookMarks; marks != "" {
		t.Errorf("hook marks %q without deleteHookResources", marks)
	}
}

// The plan prints as JSON: the decisions, not the objects the action runs
// with.
func TestPlanPrints(t *testing.T) {
	r := newRunner(memoryConfig(), testRelease(), Settings{DefaultHookOrder: v2.AfterHooks, NewRevision: &fakeNewRevision{ctx: t.Context()}})
	got := r.planFor(plan.Upgrade).String()
	want := `{"verb":"upgrade","release":"web","hookOrder":"afterHooks","wait":{"helm":"hookOnly","readiness":"watcher",` +
		`"waitForJobs":true,"timeout":300000000000},"ordering":{},"revision":{},` +
		`"recreate":{"Gate":false,"Release":{"Name":"web","Namespace":"apps"},"Memory":null},` +
		`"apply":{"serverSide":false,"auto":true},"postRenderStrategy":"combined"}`
	if got != want {
		t.Errorf("plan\n got %s\nwant %s", got, want)
	}
}
