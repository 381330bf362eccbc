package action

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// installFields are the Install action fields this package sets.
type installFields struct {
	ReleaseName, Namespace                                   string
	Timeout                                                  time.Duration
	CreateNamespace, Replace, DisableHooks                   bool
	DisableOpenAPIValidation, SkipSchemaValidation           bool
	TakeOwnership                                            bool
	WaitStrategy                                             kube.WaitStrategy
	WaitForJobs, SkipCRDs                                    bool
	ServerSideApply, ForceConflicts, ForceReplace, EnableDNS bool
	PostRenderStrategy                                       helmaction.PostRenderStrategy
	WaitOptions                                              int
}

func installView(i *helmaction.Install) installFields {
	return installFields{
		ReleaseName: i.ReleaseName, Namespace: i.Namespace, Timeout: i.Timeout,
		CreateNamespace: i.CreateNamespace, Replace: i.Replace, DisableHooks: i.DisableHooks,
		DisableOpenAPIValidation: i.DisableOpenAPIValidation, SkipSchemaValidation: i.SkipSchemaValidation,
		TakeOwnership: i.TakeOwnership, WaitStrategy: i.WaitStrategy, WaitForJobs: i.WaitForJobs,
		SkipCRDs: i.SkipCRDs, ServerSideApply: i.ServerSideApply, ForceConflicts: i.ForceConflicts,
		ForceReplace: i.ForceReplace, EnableDNS: i.EnableDNS, PostRenderStrategy: i.PostRenderStrategy,
		WaitOptions: len(i.WaitOptions),
	}
}

func TestNewInstall(t *testing.T) {
	defaults := installFields{
		ReleaseName: "app", Namespace: "flux", Timeout: 5 * time.Minute,
		TakeOwnership: true, WaitStrategy: kube.StatusWatcherStrategy, WaitForJobs: true,
		SkipCRDs: true, ServerSideApply: true, ForceConflicts: true,
		PostRenderStrategy: helmaction.PostRenderStrategyCombined,
	}
	tests := []struct {
		name    string
		obj     *v2.HelmRelease
		opts    asked
		want    func(*installFields)
		wantErr string
	}{
		{name: "defaults"},
		{name: "spec timeout", obj: newHR(withTimeout(time.Minute)), want: func(f *installFields) { f.Timeout = time.Minute }},
		{name: "install timeout wins over spec timeout",
			obj:  newHR(withTimeout(time.Minute), withInstall(helmv2.Install{Timeout: dur(10 * time.Second)})),
			want: func(f *installFields) { f.Timeout = 10 * time.Second }},
		{name: "target namespace and long name",
			obj: newHR(func(o *v2.HelmRelease) {
				o.Name = strings.Repeat("r", 50)
				o.Spec.TargetNamespace = "apps"
			}),
			want: func(f *installFields) {
				f.Namespace = "apps"
				f.ReleaseName = v2.ShortenReleaseName("apps-" + strings.Repeat("r", 50))
			}},
		{name: "boolean switches",
			obj: newHR(withInstall(helmv2.Install{
				CreateNamespace: true, Replace: true, DisableHooks: true,
				DisableOpenAPIValidation: true, DisableSchemaValidation: true,
				DisableTakeOwnership: true, DisableWaitForJobs: true,
			})),
			// createNamespace needs a targetNamespace: see
			// TestNewInstallCreateNamespaceNeedsTargetNamespace.
			want: func(f *installFields) {
				f.Replace, f.DisableHooks = true, true
				f.DisableOpenAPIValidation, f.SkipSchemaValidation = true, true
				f.TakeOwnership, f.WaitForJobs = false, false
			}},
		{name: "disableWait is hookOnly", obj: newHR(withInstall(helmv2.Install{DisableWait: true})),
			want: func(f *installFields) { f.WaitStrategy = kube.HookOnlyStrategy }},
		{name: "disableWait wins over legacy", obj: newHR(withWaitStrategy(helmv2.WaitStrategyLegacy), withInstall(helmv2.Install{DisableWait: true})),
			want: func(f *installFields) { f.WaitStrategy = kube.HookOnlyStrategy }},
		{name: "legacy wait", obj: newHR(withWaitStrategy(helmv2.WaitStrategyLegacy)),
			want: func(f *installFields) { f.WaitStrategy = kube.LegacyStrategy }},
		{name: "poller wait", obj: newHR(withWaitStrategy(helmv2.WaitStrategyPoller)),
			want: func(f *installFields) { f.WaitStrategy = kube.StatusWatcherStrategy }},
		{name: "hook-only wait keeps timeout and jobs", obj: newHR(withInstall(helmv2.Install{Timeout: dur(time.Minute)})),
			opts: asked{hookOrder: v2.AfterHooks},
			want: func(f *installFields) { f.WaitStrategy, f.Timeout = kube.HookOnlyStrategy, time.Minute }},
		{name: "hook-only wait wins over legacy and Helm 3 defaults", obj: newHR(withWaitStrategy(helmv2.WaitStrategyLegacy)),
			opts: asked{config: Config{UseHelm3Defaults: true}, hookOrder: v2.AfterHooks},
			want: func(f *installFields) {
				f.ServerSideApply, f.ForceConflicts = false, false
				f.WaitStrategy = kube.HookOnlyStrategy
				f.PostRenderStrategy = helmaction.PostRenderStrategyNoHooks
			}},
		{name: "hook-only wait keeps disableWaitForJobs", obj: newHR(withInstall(helmv2.Install{DisableWaitForJobs: true})),
			opts: asked{hookOrder: v2.AfterHooks},
			want: func(f *installFields) { f.WaitStrategy, f.WaitForJobs = kube.HookOnlyStrategy, false }},
		{name: "SSA disabled", obj: newHR(withInstall(helmv2.Install{ServerSideApply: ptr(false)})),
			want: func(f *installFields) { f.ServerSideApply, f.ForceConflicts = false, false }},
		{name: "Helm 3 defaults", opts: asked{config: Config{UseHelm3Defaults: true}},
			want: func(f *installFields) {
				f.ServerSideApply, f.ForceConflicts = false, false
				f.WaitStrategy = kube.LegacyStrategy
				f.PostRenderStrategy = helmaction.PostRenderStrategyNoHooks
			}},
		{name: "Helm 3 defaults yield to explicit fields",
			obj: newHR(withWaitStrategy(helmv2.WaitStrategyPoller),
				withInstall(helmv2.Install{ServerSideApply: ptr(true)}),
				func(o *v2.HelmRelease) { o.Spec.PostRenderStrategy = helmv2.PostRenderStrategySeparate }),
			opts: asked{config: Config{UseHelm3Defaults: true}},
			want: func(f *installFields) { f.PostRenderStrategy = helmaction.PostRenderStrategySeparate }},
		{name: "post render nohooks", obj: newHR(func(o *v2.HelmRelease) { o.Spec.PostRenderStrategy = helmv2.PostRenderStrategyNoHooks }),
			want: func(f *installFields) { f.PostRenderStrategy = helmaction.PostRenderStrategyNoHooks }},
		{name: "unknown post render strategy", obj: newHR(func(o *v2.HelmRelease) { o.Spec.PostRenderStrategy = "bogus" }),
			wantErr: "postRenderStrategy"},
		{name: "DNS lookups and wait context", opts: asked{config: Config{AllowDNSLookups: true}, waitContext: context.Background()},
			want: func(f *installFields) { f.EnableDNS, f.WaitOptions = true, 2 }},
		{name: "health check readers and wait context", opts: asked{waitContext: context.Background(), statusReaders: []engine.StatusReader{nil}},
			want: func(f *installFields) { f.WaitOptions = 3 }},
		{name: "CRD policy never reaches Helm", obj: newHR(withInstall(helmv2.Install{CRDs: helmv2.CreateReplace}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj
			if obj == nil {
				obj = newHR()
			}
			got, err := newInstall(newFakeConfig(t, "flux", nil), obj, planned(t, nil, obj, plan.Install, tt.opts))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			if tt.want != nil {
				tt.want(&want)
			}
			if v := installView(got); !reflect.DeepEqual(v, want) {
				t.Errorf("install fields\n got %+v\nwant %+v", v, want)
			}
		})
	}
}

func TestCRDPolicies(t *testing.T) {
	tests := []struct {
		name    string
		install *helmv2.Install
		upgrade *helmv2.Upgrade
		want    helmv2.CRDsPolicy
		wantErr bool
	}{
		{name: "install default Create", install: &helmv2.Install{}, want: helmv2.Create},
		// Upstream never reads the deprecated skipCRDs.
		{name: "install deprecated skipCRDs", install: &helmv2.Install{SkipCRDs: true}, want: helmv2.Create},
		{name: "install crds wins over skipCRDs", install: &helmv2.Install{SkipCRDs: true, CRDs: helmv2.CreateReplace}, want: helmv2.CreateReplace},
		{name: "install Skip", install: &helmv2.Install{CRDs: helmv2.Skip}, want: helmv2.Skip},
		{name: "install unknown", install: &helmv2.Install{CRDs: "Merge"}, wantErr: true},
		// Upstream's code, not its API documentation (Skip).
		{name: "upgrade default Create", upgrade: &helmv2.Upgrade{}, want: helmv2.Create},
		{name: "upgrade Create", upgrade: &helmv2.Upgrade{CRDs: helmv2.Create}, want: helmv2.Create},
		{name: "upgrade CreateReplace", upgrade: &helmv2.Upgrade{CRDs: helmv2.CreateReplace}, want: helmv2.CreateReplace},
		{name: "upgrade unknown", upgrade: &helmv2.Upgrade{CRDs: "Merge"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got helmv2.CRDsPolicy
			var err error
			if tt.install != nil {
				got, err = installCRDPolicy(*tt.install)
			} else {
				got, err = upgradeCRDPolicy(*tt.upgrade)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("policy = %q, want %q", got, tt.want)
			}
		})
	}
}

type upgradeFields struct {
	Namespace                                      string
	Timeout                                        time.Duration
	MaxHistory                                     int
	DisableHooks, DisableOpenAPIValidation         bool
	SkipSchemaValidation, TakeOwnership            bool
	WaitStrategy                                   kube.WaitStrategy
	WaitForJobs, CleanupOnFail                     bool
	ReuseValues, ResetValues, ResetThenReuseValues bool
	SkipCRDs, Install, EnableDNS                   bool
	ServerSideApply                                string
	ForceConflicts, ForceReplace                   bool
	PostRenderStrategy                             helmaction.PostRenderStrategy
}

func upgradeView(u *helmaction.Upgrade) upgradeFields {
	return upgradeFields{
		Namespace: u.Namespace, Timeout: u.Timeout, MaxHistory: u.MaxHistory,
		DisableHooks: u.DisableHooks, DisableOpenAPIValidation: u.DisableOpenAPIValidation,
		SkipSchemaValidation: u.SkipSchemaValidation, TakeOwnership: u.TakeOwnership,
		WaitStrategy: u.WaitStrategy, WaitForJobs: u.WaitForJobs, CleanupOnFail: u.CleanupOnFail,
		ReuseValues: u.ReuseValues, ResetValues: u.ResetValues, ResetThenReuseValues: u.ResetThenReuseValues,
		SkipCRDs: u.SkipCRDs, Install: u.Install, EnableDNS: u.EnableDNS,
		ServerSideApply: u.ServerSideApply, ForceConflicts: u.ForceConflicts, ForceReplace: u.ForceReplace,
		PostRenderStrategy: u.PostRenderStrategy,
	}
}

func TestNewUpgrade(t *testing.T) {
	defaults := upgradeFields{
		Namespace: "flux", Timeout: 5 * time.Minute, MaxHistory: 5,
		TakeOwnership: true, WaitStrategy: kube.StatusWatcherStrategy, WaitForJobs: true,
		ResetValues: true, SkipCRDs: true, ServerSideApply: "auto",
		PostRenderStrategy: helmaction.PostRenderStrategyCombined,
	}
	tests := []struct {
		name       string
		obj        *v2.HelmRelease
		opts       asked
		lastMethod string
		want       func(*upgradeFields)
		wantErr    bool
	}{
		{name: "defaults after a client-side release", lastMethod: "csa"},
		{name: "defaults after a server-side release", lastMethod: "ssa",
			want: func(f *upgradeFields) { f.ForceConflicts = true }},
		{name: "upgrade timeout wins", obj: newHR(withTimeout(time.Hour), withUpgrade(helmv2.Upgrade{Timeout: dur(time.Second)})),
			want: func(f *upgradeFields) { f.Timeout = time.Second }},
		{name: "spec timeout", obj: newHR(withTimeout(time.Hour)),
			want: func(f *upgradeFields) { f.Timeout = time.Hour }},
		{name: "maxHistory", obj: newHR(withMaxHistory(10)), want: func(f *upgradeFields) { f.MaxHistory = 10 }},
		{name: "maxHistory unlimited", obj: newHR(withMaxHistory(0)), want: func(f *upgradeFields) { f.MaxHistory = 0 }},
		{name: "target namespace", obj: newHR(func(o *v2.HelmRelease) { o.Spec.TargetNamespace = "apps" }),
			want: func(f *upgradeFields) { f.Namespace = "apps" }},
		{name: "preserveValues", obj: newHR(withUpgrade(helmv2.Upgrade{PreserveValues: true})),
			want: func(f *upgradeFields) { f.ReuseValues, f.ResetValues = true, false }},
		{name: "boolean switches",
			obj: newHR(withUpgrade(helmv2.Upgrade{
				DisableHooks: true, DisableOpenAPIValidation: true, DisableSchemaValidation: true,
				DisableTakeOwnership: true, DisableWaitForJobs: true, CleanupOnFail: true,
			})),
			want: func(f *upgradeFields) {
				f.DisableHooks, f.DisableOpenAPIValidation, f.SkipSchemaValidation = true, true, true
				f.TakeOwnership, f.WaitForJobs, f.CleanupOnFail = false, false, true
			}},
		{name: "disableWait", obj: newHR(withUpgrade(helmv2.Upgrade{DisableWait: true})),
			want: func(f *upgradeFields) { f.WaitStrategy = kube.HookOnlyStrategy }},
		{name: "legacy wait", obj: newHR(withWaitStrategy(helmv2.WaitStrategyLegacy)),
			want: func(f *upgradeFields) { f.WaitStrategy = kube.LegacyStrategy }},
		{name: "hook-only wait", obj: newHR(withWaitStrategy(helmv2.WaitStrategyLegacy), withUpgrade(helmv2.Upgrade{Timeout: dur(time.Minute)})),
			opts: asked{hookOrder: v2.AfterHooks}, lastMethod: "csa",
			want: func(f *upgradeFields) { f.WaitStrategy, f.Timeout = kube.HookOnlyStrategy, time.Minute }},
		{name: "SSA enabled forces conflicts, force ignored",
			obj:  newHR(withUpgrade(helmv2.Upgrade{ServerSideApply: helmv2.ServerSideApplyEnabled, Force: true})),
			want: func(f *upgradeFields) { f.ServerSideApply, f.ForceConflicts = "true", true }},
		{name: "SSA disabled with force replaces", lastMethod: "ssa",
			obj:  newHR(withUpgrade(helmv2.Upgrade{ServerSideApply: helmv2.ServerSideApplyDisabled, Force: true})),
			want: func(f *upgradeFields) { f.ServerSideApply, f.ForceReplace = "false", true }},
		{name: "SSA auto on a server-side release with force", lastMethod: "ssa",
			obj:  newHR(withUpgrade(helmv2.Upgrade{ServerSideApply: helmv2.ServerSideApplyAuto, Force: true})),
			want: func(f *upgradeFields) { f.ForceConflicts = true }},
		{name: "SSA auto on a Helm 3 release with force", lastMethod: "",
			obj:  newHR(withUpgrade(helmv2.Upgrade{Force: true})),
			want: func(f *upgradeFields) { f.ForceReplace = true }},
		{name: "unknown SSA mode", obj: newHR(withUpgrade(helmv2.Upgrade{ServerSideApply: "sometimes"})), wantErr: true},
		{name: "Helm 3 defaults keep auto", opts: asked{config: Config{UseHelm3Defaults: true}}, lastMethod: "ssa",
			want: func(f *upgradeFields) {
				f.ForceConflicts = true
				f.WaitStrategy = kube.LegacyStrategy
				f.PostRenderStrategy = helmaction.PostRenderStrategyNoHooks
			}},
		{name: "DNS lookups", opts: asked{config: Config{AllowDNSLookups: true}}, want: func(f *upgradeFields) { f.EnableDNS = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj
			if obj == nil {
				obj = newHR()
			}
			c := planned(t, nil, obj, plan.Upgrade, tt.opts)
			c.Plan = c.Plan.Upgrading(&releasev1.Release{ApplyMethod: tt.lastMethod})
			got, err := newUpgrade(newFakeConfig(t, "flux", nil), obj, c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			want := defaults
			if tt.want != nil {
				tt.want(&want)
			}
			if v := upgradeView(got); !reflect.DeepEqual(v, want) {
				t.Errorf("upgrade fields\n got %+v\nwant %+v", v, want)
			}
		})
	}
}

type rollbackFields struct {
	Version                      int
	Timeout                      time.Duration
	MaxHistory                   int
	DisableHooks                 bool
	WaitStrategy                 kube.WaitStrategy
	WaitForJobs, CleanupOnFail   bool
	ServerSideApply              string
	ForceConflicts, ForceReplace bool
}

func TestNewRollback(t *testing.T) {
	defaults := rollbackFields{
		Timeout: 5 * time.Minute, MaxHistory: 5, WaitStrategy: kube.StatusWatcherStrategy,
		WaitForJobs: true, ServerSideApply: "auto",
	}
	tests := []struct {
		name         string
		obj          *v2.HelmRelease
		opts         asked
		version      int
		targetMethod string
		want         func(*rollbackFields)
		wantErr      bool
	}{
		{name: "defaults"},
		{name: "version", version: 3, want: func(f *rollbackFields) { f.Version = 3 }},
		{name: "rollback timeout wins", obj: newHR(withTimeout(time.Hour), withRollback(helmv2.Rollback{Timeout: dur(time.Minute)})),
			want: func(f *rollbackFields) { f.Timeout = time.Minute }},
		{name: "switches",
			obj: newHR(withMaxHistory(2), withRollback(helmv2.Rollback{
				DisableHooks: true, DisableWaitForJobs: true, CleanupOnFail: true, Recreate: true,
			})),
			want: func(f *rollbackFields) {
				f.MaxHistory, f.DisableHooks, f.WaitForJobs, f.CleanupOnFail = 2, true, false, true
			}},
		{name: "disableWait", obj: newHR(withRollback(helmv2.Rollback{DisableWait: true})),
			want: func(f *rollbackFields) { f.WaitStrategy = kube.HookOnlyStrategy }},
		{name: "Helm 3 defaults", opts: asked{config: Config{UseHelm3Defaults: true}},
			want: func(f *rollbackFields) { f.WaitStrategy = kube.LegacyStrategy }},
		{name: "hook-only wait", opts: asked{hookOrder: v2.AfterHooks},
			obj: newHR(withRollback(helmv2.Rollback{Timeout: dur(time.Minute), DisableWaitForJobs: true})),
			want: func(f *rollbackFields) {
				f.WaitStrategy, f.Timeout, f.WaitForJobs = kube.HookOnlyStrategy, time.Minute, false
			}},
		{name: "force on a client-side target replaces", targetMethod: "csa",
			obj:  newHR(withRollback(helmv2.Rollback{Force: true})),
			want: func(f *rollbackFields) { f.ForceReplace = true }},
		{name: "force on a server-side target", targetMethod: "ssa",
			obj:  newHR(withRollback(helmv2.Rollback{Force: true})),
			want: func(f *rollbackFields) { f.ForceConflicts = true }},
		{name: "SSA enabled", obj: newHR(withRollback(helmv2.Rollback{ServerSideApply: helmv2.ServerSideApplyEnabled})),
			want: func(f *rollbackFields) { f.ServerSideApply, f.ForceConflicts = "true", true }},
		{name: "SSA disabled", targetMethod: "ssa", obj: newHR(withRollback(helmv2.Rollback{ServerSideApply: helmv2.ServerSideApplyDisabled})),
			want: func(f *rollbackFields) { f.ServerSideApply = "false" }},
		{name: "unknown SSA mode", obj: newHR(withRollback(helmv2.Rollback{ServerSideApply: "x"})), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj
			if obj == nil {
				obj = newHR()
			}
			c := planned(t, nil, obj, plan.Rollback, tt.opts)
			var err error
			c.Plan, err = c.Plan.Follow(&releasev1.Release{ApplyMethod: tt.targetMethod})
			if err != nil {
				t.Fatal(err)
			}
			r, err := newRollback(newFakeConfig(t, "flux", nil), obj, c, tt.version)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			want := defaults
			if tt.want != nil {
				tt.want(&want)
			}
			got := rollbackFields{
				Version: r.Version, Timeout: r.Timeout, MaxHistory: r.MaxHistory, DisableHooks: r.DisableHooks,
				WaitStrategy: r.WaitStrategy, WaitForJobs: r.WaitForJobs, CleanupOnFail: r.CleanupOnFail,
				ServerSideApply: r.ServerSideApply, ForceConflicts: r.ForceConflicts, ForceReplace: r.ForceReplace,
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("rollback fields\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestReadinessWait(t *testing.T) {
	type wait struct {
		Strategy    kube.WaitStrategy
		WaitForJobs bool
		Timeout     time.Duration
	}
	type waits struct{ install, upgrade, rollback wait }
	def := wait{Strategy: kube.StatusWatcherStrategy, WaitForJobs: true, Timeout: plan.DefaultTimeout}
	tests := []struct {
		name string
		obj  *v2.HelmRelease
		opts asked
		want func(*waits)
	}{
		{name: "defaults"},
		{name: "spec timeout", obj: newHR(withTimeout(time.Hour)), want: func(w *waits) {
			w.install.Timeout, w.upgrade.Timeout, w.rollback.Timeout = time.Hour, time.Hour, time.Hour
		}},
		{name: "action timeouts and jobs",
			obj: newHR(withTimeout(time.Hour),
				withInstall(helmv2.Install{Timeout: dur(time.Second), DisableWaitForJobs: true}),
				withUpgrade(helmv2.Upgrade{Timeout: dur(2 * time.Second)}),
				withRollback(helmv2.Rollback{Timeout: dur(3 * time.Second), DisableWaitForJobs: true})),
			want: func(w *waits) {
				w.install.Timeout, w.install.WaitForJobs = time.Second, false
				w.upgrade.Timeout = 2 * time.Second
				w.rollback.Timeout, w.rollback.WaitForJobs = 3*time.Second, false
			}},
		{name: "legacy", obj: newHR(withWaitStrategy(helmv2.WaitStrategyLegacy)), want: func(w *waits) {
			w.install.Strategy, w.upgrade.Strategy, w.rollback.Strategy = kube.LegacyStrategy, kube.LegacyStrategy, kube.LegacyStrategy
		}},
		{name: "poller", obj: newHR(withWaitStrategy(helmv2.WaitStrategyPoller)), opts: asked{config: Config{UseHelm3Defaults: true}}},
		{name: "Helm 3 defaults", opts: asked{config: Config{UseHelm3Defaults: true}}, want: func(w *waits) {
			w.install.Strategy, w.upgrade.Strategy, w.rollback.Strategy = kube.LegacyStrategy, kube.LegacyStrategy, kube.LegacyStrategy
		}},
		{name: "hook-only does not change the readiness wait", opts: asked{hookOrder: v2.AfterHooks}},
		{name: "disableWait does not change the readiness wait",
			obj: newHR(withInstall(helmv2.Install{DisableWait: true}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := tt.obj
			if obj == nil {
				obj = newHR()
			}
			want := waits{def, def, def}
			if tt.want != nil {
				tt.want(&want)
			}
			readiness := func(v plan.Verb) wait {
				w := planned(t, nil, obj, v, tt.opts).Plan.Wait
				return wait{Strategy: w.Readiness, WaitForJobs: w.WaitForJobs, Timeout: w.Timeout}
			}
			got := waits{readiness(plan.Install), readiness(plan.Upgrade), readiness(plan.Rollback)}
			if got != want {
				t.Errorf("waits\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestNewUninstall(t *testing.T) {
	type fields struct {
		Timeout                   time.Duration
		KeepHistory, DisableHooks bool
		WaitStrategy              kube.WaitStrategy
		DeletionPropagation       string
	}
	defaults := fields{Timeout: 5 * time.Minute, WaitStrategy: kube.StatusWatcherStrategy, DeletionPropagation: "background"}
	tests := []struct {
		name string
		obj  *v2.HelmRelease
		opts asked
		want func(*fields)
	}{
		{name: "defaults", obj: newHR()},
		{name: "spec timeout", obj: newHR(withTimeout(time.Minute)), want: func(f *fields) { f.Timeout = time.Minute }},
		{name: "all fields",
			obj: newHR(withTimeout(time.Minute), withUninstall(helmv2.Uninstall{
				Timeout: dur(time.Second), KeepHistory: true, DisableHooks: true, DisableWait: true,
				DeletionPropagation: ptr("foreground"),
			})),
			want: func(f *fields) {
				f.Timeout, f.KeepHistory, f.DisableHooks = time.Second, true, true
				f.WaitStrategy, f.DeletionPropagation = kube.HookOnlyStrategy, "foreground"
			}},
		{name: "legacy via Helm 3 defaults", obj: newHR(), opts: asked{config: Config{UseHelm3Defaults: true}},
			want: func(f *fields) { f.WaitStrategy = kube.LegacyStrategy }},
		{name: "orphan", obj: newHR(withUninstall(helmv2.Uninstall{DeletionPropagation: ptr("orphan")})),
			want: func(f *fields) { f.DeletionPropagation = "orphan" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := newUninstall(newFakeConfig(t, "flux", nil), tt.obj, planned(t, nil, tt.obj, plan.Uninstall, tt.opts).Plan)
			want := defaults
			if tt.want != nil {
				tt.want(&want)
			}
			got := fields{u.Timeout, u.KeepHistory, u.DisableHooks, u.WaitStrategy, u.DeletionPropagation}
			if got != want {
				t.Errorf("uninstall fields\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestNewTest(t *testing.T) {
	tests := []struct {
		name        string
		obj         *v2.HelmRelease
		wantTimeout time.Duration
		wantNS      string
		wantFilters map[string][]string
	}{
		{name: "defaults", obj: newHR(), wantTimeout: 5 * time.Minute, wantNS: "flux", wantFilters: map[string][]string{}},
		{name: "spec timeout and target namespace",
			obj:         newHR(withTimeout(time.Minute), func(o *v2.HelmRelease) { o.Spec.TargetNamespace = "apps" }),
			wantTimeout: time.Minute, wantNS: "apps", wantFilters: map[string][]string{}},
		{name: "test timeout and filters",
			obj: newHR(withTimeout(time.Minute), withTest(helmv2.Test{
				Enable: true, Timeout: dur(time.Second),
				Filters: &[]helmv2.Filter{{Name: "a"}, {Name: "b", Exclude: true}, {Name: "c"}},
			})),
			wantTimeout: time.Second, wantNS: "flux",
			wantFilters: map[string][]string{"name": {"a", "c"}, "!name": {"b"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := newTest(newFakeConfig(t, "flux", nil), tt.obj, planned(t, nil, tt.obj, plan.Test, asked{}).Plan)
			if rt.Timeout != tt.wantTimeout || rt.Namespace != tt.wantNS {
				t.Errorf("timeout %v namespace %q, want %v %q", rt.Timeout, rt.Namespace, tt.wantTimeout, tt.wantNS)
			}
			if !reflect.DeepEqual(rt.Filters, tt.wantFilters) {
				t.Errorf("filters = %v, want %v", rt.Filters, tt.wantFilters)
			}
		})
	}
}

// createNamespace only creates the targetNamespace, as upstream: without
// one the release goes to the HelmRelease's own namespace, which exists,
// and Helm's server-side apply of the Namespace would only label it.
func TestNewInstallCreateNamespaceNeedsTargetNamespace(t *testing.T) {
	tests := []struct {
		name   string
		target string
		want   bool
	}{
		{name: "with a target namespace", target: "apps", want: true},
		{name: "in the HelmRelease's namespace", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := newHR(withInstall(helmv2.Install{CreateNamespace: true}), func(o *v2.HelmRelease) { o.Spec.TargetNamespace = tt.target })
			in, err := newInstall(newFakeConfig(t, "flux", nil), obj, planned(t, nil, obj, plan.Install, asked{}))
			if err != nil {
				t.Fatal(err)
			}
			if in.CreateNamespace != tt.want {
				t.Errorf("CreateNamespace %t, want %t", in.CreateNamespace, tt.want)
			}
		})
	}
}
