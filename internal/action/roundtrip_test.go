package action

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// statuses returns version→status of the stored history, checking it is
// ordered newest first.
func statuses(t *testing.T, h []*releasev1.Release) map[int]rcommon.Status {
	t.Helper()
	out := map[int]rcommon.Status{}
	for i, r := range h {
		if i > 0 && h[i-1].Version <= r.Version {
			t.Errorf("history not newest first: v%d before v%d", h[i-1].Version, r.Version)
		}
		out[r.Version] = r.Info.Status
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	cfg := newFakeConfig(t, "flux", nil)
	obj := newHR(withUninstall(helmv2.Uninstall{KeepHistory: true}))

	if _, err := LastRelease(cfg, "app"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("LastRelease before install: err = %v, want ErrReleaseNotFound", err)
	}
	if h, err := History(cfg, "app"); err != nil || len(h) != 0 {
		t.Fatalf("History before install = %v, %v; want empty, nil", h, err)
	}

	steps := []struct {
		name         string
		run          func() (*releasev1.Release, error)
		wantVersion  int
		wantStatus   rcommon.Status
		wantConfig   map[string]any
		wantStatuses map[int]rcommon.Status
	}{
		{
			name: "install",
			run: func() (*releasev1.Release, error) {
				return Install(ctx, cfg, obj, testChart("1.0.0"), map[string]any{"foo": "one"}, planned(t, nil, obj, plan.Install, asked{}))
			},
			wantVersion: 1, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{"foo": "one"},
			wantStatuses: map[int]rcommon.Status{1: rcommon.StatusDeployed},
		},
		{
			name: "upgrade",
			run: func() (*releasev1.Release, error) {
				return Upgrade(ctx, cfg, obj, testChart("1.1.0"), map[string]any{"foo": "two"}, planned(t, cfg, obj, plan.Upgrade, asked{}))
			},
			wantVersion: 2, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{"foo": "two"},
			wantStatuses: map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusDeployed},
		},
		{
			name: "upgrade with preserveValues merges the last values",
			run: func() (*releasev1.Release, error) {
				o := obj.DeepCopy()
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{PreserveValues: true}}
				return Upgrade(ctx, cfg, o, testChart("1.2.0"), map[string]any{"bar": "x"}, planned(t, cfg, o, plan.Upgrade, asked{}))
			},
			wantVersion: 3, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{"foo": "two", "bar": "x"},
			wantStatuses: map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusDeployed},
		},
		{
			name: "upgrade without preserveValues resets them",
			run: func() (*releasev1.Release, error) {
				return Upgrade(ctx, cfg, obj, testChart("1.2.0"), map[string]any{}, planned(t, cfg, obj, plan.Upgrade, asked{}))
			},
			wantVersion: 4, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{},
			wantStatuses: map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusSuperseded, 4: rcommon.StatusDeployed},
		},
		{
			name: "rollback to the previous revision",
			run: func() (*releasev1.Release, error) {
				if err := Rollback(ctx, cfg, obj, 0, planned(t, cfg, obj, plan.Rollback, asked{toVersion: 0})); err != nil {
					return nil, err
				}
				return LastRelease(cfg, "app")
			},
			wantVersion: 5, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{"foo": "two", "bar": "x"},
			wantStatuses: map[int]rcommon.Status{1: rcommon.StatusSuperseded, 2: rcommon.StatusSuperseded, 3: rcommon.StatusSuperseded, 4: rcommon.StatusSuperseded, 5: rcommon.StatusDeployed},
		},
		{
			name: "rollback to an explicit revision",
			run: func() (*releasev1.Release, error) {
				if err := Rollback(ctx, cfg, obj, 1, planned(t, cfg, obj, plan.Rollback, asked{toVersion: 1})); err != nil {
					return nil, err
				}
				return LastRelease(cfg, "app")
			},
			wantVersion: 6, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{"foo": "one"},
			// maxHistory 5 (the default) pruned revision 1.
			wantStatuses: map[int]rcommon.Status{2: rcommon.StatusSuperseded, 3: rcommon.StatusSuperseded, 4: rcommon.StatusSuperseded, 5: rcommon.StatusSuperseded, 6: rcommon.StatusDeployed},
		},
		{
			name: "uninstall keeping history",
			run: func() (*releasev1.Release, error) {
				res, err := Uninstall(ctx, cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{}))
				if err != nil {
					return nil, err
				}
				rel, ok := res.Release.(*releasev1.Release)
				if !ok {
					t.Fatalf("uninstall response release is %T", res.Release)
				}
				return rel, nil
			},
			wantVersion: 6, wantStatus: rcommon.StatusUninstalled, wantConfig: map[string]any{"foo": "one"},
			wantStatuses: map[int]rcommon.Status{2: rcommon.StatusSuperseded, 3: rcommon.StatusSuperseded, 4: rcommon.StatusSuperseded, 5: rcommon.StatusSuperseded, 6: rcommon.StatusUninstalled},
		},
		{
			name: "install with replace reuses the name",
			run: func() (*releasev1.Release, error) {
				o := obj.DeepCopy()
				o.Spec.Install = &v2.Install{Install: helmv2.Install{Replace: true}}
				return Install(ctx, cfg, o, testChart("2.0.0"), map[string]any{"foo": "three"}, planned(t, nil, o, plan.Install, asked{}))
			},
			wantVersion: 7, wantStatus: rcommon.StatusDeployed, wantConfig: map[string]any{"foo": "three"},
			// Replace supersedes the uninstalled revision; as upstream's,
			// the install prunes nothing (v2 stays until the next upgrade).
			wantStatuses: map[int]rcommon.Status{2: rcommon.StatusSuperseded, 3: rcommon.StatusSuperseded, 4: rcommon.StatusSuperseded, 5: rcommon.StatusSuperseded, 6: rcommon.StatusSuperseded, 7: rcommon.StatusDeployed},
		},
	}
	for _, st := range steps {
		rel, err := st.run()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if rel.Version != st.wantVersion || rel.Info.Status != st.wantStatus {
			t.Errorf("%s: got v%d %s, want v%d %s", st.name, rel.Version, rel.Info.Status, st.wantVersion, st.wantStatus)
		}
		if !reflect.DeepEqual(rel.Config, st.wantConfig) {
			t.Errorf("%s: config = %v, want %v", st.name, rel.Config, st.wantConfig)
		}
		h, err := History(cfg, "app")
		if err != nil {
			t.Fatalf("%s: history: %v", st.name, err)
		}
		if got := statuses(t, h); !reflect.DeepEqual(got, st.wantStatuses) {
			t.Errorf("%s: history statuses = %v, want %v", st.name, got, st.wantStatuses)
		}
		last, err := LastRelease(cfg, "app")
		if err != nil || last.Version != h[0].Version {
			t.Errorf("%s: LastRelease = %v, %v; want the newest history entry v%d", st.name, last, err, h[0].Version)
		}
	}
}

func TestInstallRecordsApplyMethod(t *testing.T) {
	tests := []struct {
		name string
		obj  *v2.HelmRelease
		opts asked
		want releasev1.ApplyMethod
	}{
		{name: "Helm 4 default", obj: newHR(), want: releasev1.ApplyMethodServerSideApply},
		{name: "Helm 3 defaults", obj: newHR(), opts: asked{config: Config{UseHelm3Defaults: true}}, want: releasev1.ApplyMethodClientSideApply},
		{name: "explicit SSA under Helm 3 defaults", obj: newHR(withInstall(helmv2.Install{ServerSideApply: ptr(true)})),
			opts: asked{config: Config{UseHelm3Defaults: true}}, want: releasev1.ApplyMethodServerSideApply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := newFakeConfig(t, "flux", nil)
			rel, err := Install(context.Background(), cfg, tt.obj, testChart("1.0.0"), nil, planned(t, nil, tt.obj, plan.Install, tt.opts))
			if err != nil {
				t.Fatal(err)
			}
			if rel.ApplyMethod != string(tt.want) {
				t.Errorf("apply method %q, want %q", rel.ApplyMethod, tt.want)
			}
			// An upgrade with serverSideApply auto keeps the method.
			up, err := Upgrade(context.Background(), cfg, tt.obj, testChart("1.0.1"), nil, planned(t, cfg, tt.obj, plan.Upgrade, tt.opts))
			if err != nil {
				t.Fatal(err)
			}
			if up.ApplyMethod != string(tt.want) {
				t.Errorf("after upgrade: apply method %q, want %q", up.ApplyMethod, tt.want)
			}
		})
	}
}

func TestMaxHistory(t *testing.T) {
	tests := []struct {
		name     string
		obj      *v2.HelmRelease
		upgrades int
		want     int
	}{
		{name: "default keeps 5", obj: newHR(), upgrades: 7, want: 5},
		{name: "explicit 2", obj: newHR(withMaxHistory(2)), upgrades: 4, want: 2},
		{name: "0 is unlimited", obj: newHR(withMaxHistory(0)), upgrades: 7, want: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := newFakeConfig(t, "flux", nil)
			if _, err := Install(ctx, cfg, tt.obj, testChart("1.0.0"), nil, planned(t, nil, tt.obj, plan.Install, asked{})); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tt.upgrades; i++ {
				if _, err := Upgrade(ctx, cfg, tt.obj, testChart("1.0.0"), map[string]any{"i": i}, planned(t, cfg, tt.obj, plan.Upgrade, asked{})); err != nil {
					t.Fatal(err)
				}
			}
			h, err := History(cfg, "app")
			if err != nil {
				t.Fatal(err)
			}
			if len(h) != tt.want {
				t.Errorf("kept %d revisions, want %d", len(h), tt.want)
			}
			if h[0].Version != tt.upgrades+1 || h[0].Info.Status != rcommon.StatusDeployed {
				t.Errorf("newest is v%d %s, want v%d deployed", h[0].Version, h[0].Info.Status, tt.upgrades+1)
			}
		})
	}
}

func TestReleaseNamespaces(t *testing.T) {
	cfg := newFakeConfig(t, "apps", nil)
	obj := newHR(func(o *v2.HelmRelease) {
		o.Spec.TargetNamespace = "apps"
		o.Spec.StorageNamespace = "store"
	})
	rel, err := Install(context.Background(), cfg, obj, testChart("1.0.0"), nil, planned(t, nil, obj, plan.Install, asked{}))
	if err != nil {
		t.Fatal(err)
	}
	if rel.Name != "apps-app" || rel.Namespace != "apps" {
		t.Errorf("release %s/%s, want apps/apps-app", rel.Namespace, rel.Name)
	}
	if _, err := LastRelease(cfg, "app"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("the object name is not the release name, LastRelease err = %v", err)
	}
}

func TestFailedInstallAndUpgrade(t *testing.T) {
	ctx := context.Background()
	waitErr := errors.New("resources not ready")
	failing := &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, WaitError: waitErr}

	cfg := newFakeConfig(t, "flux", failing)
	rel, err := Install(ctx, cfg, newHR(), testChart("1.0.0"), nil, planned(t, nil, newHR(), plan.Install, asked{}))
	if !errors.Is(err, waitErr) {
		t.Fatalf("install err = %v, want the wait error", err)
	}
	if rel == nil || rel.Info.Status != rcommon.StatusFailed || rel.Version != 1 {
		t.Fatalf("install returned %+v, want failed v1", rel)
	}

	// A failed upgrade of a deployed release records a failed revision and
	// leaves the deployed one in place.
	cfg = newFakeConfig(t, "flux", nil)
	if _, err := Install(ctx, cfg, newHR(), testChart("1.0.0"), nil, planned(t, nil, newHR(), plan.Install, asked{})); err != nil {
		t.Fatal(err)
	}
	cfg.KubeClient = failing
	rel, err = Upgrade(ctx, cfg, newHR(), testChart("1.1.0"), nil, planned(t, cfg, newHR(), plan.Upgrade, asked{}))
	if !errors.Is(err, waitErr) {
		t.Fatalf("upgrade err = %v, want the wait error", err)
	}
	if rel == nil || rel.Info.Status != rcommon.StatusFailed || rel.Version != 2 {
		t.Fatalf("upgrade returned %+v, want failed v2", rel)
	}
	h, err := History(cfg, "app")
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(t, h); !reflect.DeepEqual(got, map[int]rcommon.Status{1: rcommon.StatusDeployed, 2: rcommon.StatusFailed}) {
		t.Errorf("statuses = %v", got)
	}
}

func TestUpgradeWithoutRelease(t *testing.T) {
	cfg := newFakeConfig(t, "flux", nil)
	_, err := Upgrade(context.Background(), cfg, newHR(), testChart("1.0.0"), nil, planned(t, cfg, newHR(), plan.Upgrade, asked{}))
	if !errors.Is(err, driver.ErrNoDeployedReleases) {
		t.Errorf("err = %v, want ErrNoDeployedReleases", err)
	}
}

func TestUninstallWithoutHistory(t *testing.T) {
	ctx := context.Background()
	cfg := newFakeConfig(t, "flux", nil)
	if _, err := Install(ctx, cfg, newHR(), testChart("1.0.0"), nil, planned(t, nil, newHR(), plan.Install, asked{})); err != nil {
		t.Fatal(err)
	}
	res, err := Uninstall(ctx, cfg, newHR(), planned(t, cfg, newHR(), plan.Uninstall, asked{}))
	if err != nil {
		t.Fatal(err)
	}
	if rel, ok := res.Release.(*releasev1.Release); !ok || rel.Info.Status != rcommon.StatusUninstalled {
		t.Errorf("response release = %#v, want an uninstalled *releasev1.Release", res.Release)
	}
	if _, err := LastRelease(cfg, "app"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("after uninstall without keepHistory, LastRelease err = %v, want ErrReleaseNotFound", err)
	}
}

func TestTestAction(t *testing.T) {
	phases := func(rel *releasev1.Release) map[string]releasev1.HookPhase {
		out := map[string]releasev1.HookPhase{}
		for _, h := range rel.Hooks {
			for _, e := range h.Events {
				if e == releasev1.HookTest {
					out[h.Name] = h.LastRun.Phase
				}
			}
		}
		return out
	}
	tests := []struct {
		name    string
		filters *[]helmv2.Filter
		kc      kube.Interface
		want    map[string]releasev1.HookPhase
		wantErr bool
	}{
		{name: "no filters runs all",
			want: map[string]releasev1.HookPhase{"test-a": releasev1.HookPhaseSucceeded, "test-b": releasev1.HookPhaseSucceeded}},
		{name: "include filter", filters: &[]helmv2.Filter{{Name: "test-a"}},
			want: map[string]releasev1.HookPhase{"test-a": releasev1.HookPhaseSucceeded, "test-b": ""}},
		{name: "exclude filter", filters: &[]helmv2.Filter{{Name: "test-a", Exclude: true}},
			want: map[string]releasev1.HookPhase{"test-a": "", "test-b": releasev1.HookPhaseSucceeded}},
		{name: "failing test",
			kc: &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard},
				WatchUntilReadyError: errors.New("test pod failed")},
			filters: &[]helmv2.Filter{{Name: "test-b"}},
			want:    map[string]releasev1.HookPhase{"test-a": "", "test-b": releasev1.HookPhaseFailed},
			wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := newFakeConfig(t, "flux", nil)
			obj := newHR(withTest(helmv2.Test{Enable: true, Filters: tt.filters}))
			if _, err := Install(ctx, cfg, obj, testChart("1.0.0"), nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
				t.Fatal(err)
			}
			if tt.kc != nil {
				cfg.KubeClient = tt.kc
			}
			rel, err := Test(ctx, cfg, obj, planned(t, nil, obj, plan.Test, asked{}))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if rel == nil {
				t.Fatal("no release returned")
			}
			if got := phases(rel); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("test hook phases = %v, want %v", got, tt.want)
			}
			// The results are stored too.
			stored, err := LastRelease(cfg, "app")
			if err != nil {
				t.Fatal(err)
			}
			if got := phases(stored); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("stored test hook phases = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNilObject(t *testing.T) {
	cfg := newFakeConfig(t, "flux", nil)
	ctx := context.Background()
	checks := map[string]error{}
	_, checks["install"] = Install(ctx, cfg, nil, testChart("1.0.0"), nil, planned(t, nil, nil, plan.Install, asked{}))
	_, checks["upgrade"] = Upgrade(ctx, cfg, nil, testChart("1.0.0"), nil, planned(t, cfg, nil, plan.Upgrade, asked{}))
	_, checks["test"] = Test(ctx, cfg, nil, planned(t, nil, nil, plan.Test, asked{}))
	checks["rollback"] = Rollback(ctx, cfg, nil, 0, planned(t, cfg, nil, plan.Rollback, asked{toVersion: 0}))
	_, checks["uninstall"] = Uninstall(ctx, cfg, nil, planned(t, cfg, nil, plan.Uninstall, asked{}))
	for name, err := range checks {
		if !errors.Is(err, errNilObject) {
			t.Errorf("%s: err = %v, want errNilObject", name, err)
		}
	}
}

// TestInstallReplaceKeepsHistory: an install that replaces kept records
// prunes none of them, as upstream's install (only upgrades and rollbacks
// apply maxHistory); the next upgrade does.
func TestInstallReplaceKeepsHistory(t *testing.T) {
	ctx := context.Background()
	mem := driver.NewMemory()
	mem.SetNamespace("flux")
	fresh := func() *helmaction.Configuration {
		cfg := newFakeConfig(t, "flux", nil)
		cfg.Releases = storage.Init(mem)
		return cfg
	}
	unlimited := newHR(withMaxHistory(0), withUninstall(helmv2.Uninstall{KeepHistory: true}))
	if _, err := Install(ctx, fresh(), unlimited, testChart("1.0.0"), nil, planned(t, nil, unlimited, plan.Install, asked{})); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := Upgrade(ctx, fresh(), unlimited, testChart("1.0.0"), map[string]any{"i": i}, planned(t, fresh(), unlimited, plan.Upgrade, asked{})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Uninstall(ctx, fresh(), unlimited, planned(t, fresh(), unlimited, plan.Uninstall, asked{})); err != nil {
		t.Fatal(err)
	}

	replace := newHR(withMaxHistory(2), withInstall(helmv2.Install{Replace: true}))
	rel, err := Install(ctx, fresh(), replace, testChart("1.0.0"), nil, planned(t, nil, replace, plan.Install, asked{}))
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 5 {
		t.Errorf("replacing install is v%d, want v5", rel.Version)
	}
	h, err := History(fresh(), "app")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 5 {
		t.Errorf("kept %d revisions after the install, want all 5", len(h))
	}
	if _, err := Upgrade(ctx, fresh(), replace, testChart("1.0.0"), map[string]any{"i": "next"}, planned(t, fresh(), replace, plan.Upgrade, asked{})); err != nil {
		t.Fatal(err)
	}
	if h, err = History(fresh(), "app"); err != nil || len(h) != 2 {
		t.Errorf("kept %d revisions after the upgrade (%v), want 2", len(h), err)
	}
}

// TestTestHookCleanupErrorDoesNotFailTheTest: the tests passed, and only
// deleting a test hook by its hook-succeeded policy failed afterwards. As
// upstream, the test run counts as passed (the error is logged), so a
// cleanup hiccup never triggers remediation of a release whose tests pass.
func TestTestHookCleanupErrorDoesNotFailTheTest(t *testing.T) {
	ctx := context.Background()
	var logs strings.Builder
	cfg := newFakeConfig(t, "flux", nil)
	cfg.SetLogger(slog.NewTextHandler(&logs, nil))
	chrt := testChart("1.0.0")
	// Only hook-succeeded: no delete before the hooks are created.
	for i, name := range map[int]string{2: "test-a", 3: "test-b"} {
		chrt.Templates[i].Data = []byte(hookTemplate(name, "test") + "    \"helm.sh/hook-delete-policy\": hook-succeeded\n")
	}
	obj := newHR(withTest(helmv2.Test{Enable: true}))
	if _, err := Install(ctx, cfg, obj, chrt, nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
		t.Fatal(err)
	}
	cfg.KubeClient = &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard},
		DeleteError: errors.New("etcdserver: request timed out")}
	rel, err := Test(ctx, cfg, obj, planned(t, nil, obj, plan.Test, asked{}))
	if err != nil {
		t.Fatalf("Test failed on the hook cleanup: %v", err)
	}
	for _, h := range rel.Hooks {
		if strings.HasPrefix(h.Name, "test-") && h.LastRun.Phase != releasev1.HookPhaseSucceeded {
			t.Errorf("hook %s phase %s, want Succeeded", h.Name, h.LastRun.Phase)
		}
	}
	if !strings.Contains(logs.String(), "etcdserver: request timed out") {
		t.Errorf("the cleanup error was not logged; logs:\n%s", logs.String())
	}
}
