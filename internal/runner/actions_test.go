package runner

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"helm.sh/helm/v4/pkg/release/common"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// phaseCount is how many phases of action, hookOrder and phase the
// metric observed.
func phaseCount(t *testing.T, action, hookOrder, phase string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := phaseDuration.WithLabelValues(action, hookOrder, phase).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// An install over an uninstalled release whose history was kept installs
// again (Helm's replace). Over a failed one Helm refuses, as it does over a
// deployed one: the state machine upgrades a failed release, as upstream
// does, and never installs over it.
func TestInstallReplacesOnlyAnUninstalledRelease(t *testing.T) {
	for _, tt := range []struct {
		last    common.Status
		wantErr bool
	}{
		{last: common.StatusUninstalled},
		{last: common.StatusFailed, wantErr: true},
		{last: common.StatusDeployed, wantErr: true},
	} {
		t.Run(string(tt.last), func(t *testing.T) {
			r := actionRunner(testRelease(), Settings{})
			if _, err := r.Install(t.Context(), configMapChart("1.0.0"), nil, ownrevision.Mark{}); err != nil {
				t.Fatal(err)
			}
			last, err := r.LastRelease(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			last.Info.Status = tt.last
			if err := r.cfg.Releases.Update(last); err != nil {
				t.Fatal(err)
			}
			rel, err := r.Install(t.Context(), configMapChart("1.0.1"), nil, ownrevision.Mark{})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("installed over a %s release", tt.last)
				}
				return
			}
			if err != nil || rel.Version != 2 || rel.Info.Status != common.StatusDeployed {
				t.Fatalf("install again: %v, %v", rel, err)
			}
			if r.obj.Spec.Install != nil && r.obj.Spec.Install.Replace {
				t.Error("the replace leaked into the HelmRelease")
			}
		})
	}
}

// A beforeHooks action records its Helm phase; an afterHooks one reports
// its phases through the observer instead (see afterhooksevents.go).
func TestHelmPhaseMetricOfBeforeHooksActionsOnly(t *testing.T) {
	before := phaseCount(t, "upgrade", string(v2.BeforeHooks), "helm")
	r := actionRunner(testRelease(), Settings{})
	if _, err := r.Install(t.Context(), configMapChart("1.0.0"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Upgrade(t.Context(), configMapChart("1.0.1"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	if got := phaseCount(t, "upgrade", string(v2.BeforeHooks), "helm"); got != before+1 {
		t.Errorf("beforeHooks upgrade helm phases %d, want %d", got, before+1)
	}
	afterBefore := phaseCount(t, "upgrade", string(v2.BeforeHooks), "helm")
	after := actionRunner(testRelease(), Settings{DefaultHookOrder: v2.AfterHooks})
	if _, err := after.Install(t.Context(), configMapChart("1.0.0"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	if _, err := after.Upgrade(t.Context(), configMapChart("1.0.1"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	if got := phaseCount(t, "upgrade", string(v2.BeforeHooks), "helm"); got != afterBefore {
		t.Errorf("an afterHooks upgrade recorded a beforeHooks helm phase")
	}
	if got := phaseCount(t, "upgrade", string(v2.AfterHooks), "readiness"); got == 0 {
		t.Errorf("the afterHooks upgrade recorded no readiness phase")
	}
}

// A resumed wait without a pending revision fails, naming the release.
func TestResumeWaitWithoutPendingRevision(t *testing.T) {
	r := actionRunner(testRelease(), Settings{DefaultHookOrder: v2.AfterHooks})
	if _, err := r.Install(t.Context(), configMapChart("1.0.0"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	last, _ := r.LastRelease(t.Context())
	_, err := r.ResumeWait(t.Context(), last)
	if err == nil || !strings.Contains(err.Error(), "recovering the pending revision of web") {
		t.Errorf("resumed a deployed revision: %v", err)
	}
}

// Drift correction takes fields over from the --override-manager managers
// only when it corrects; warn mode only reports, and must write nothing.
func TestDriftOptionsTakeFieldsOverOnlyWhenCorrecting(t *testing.T) {
	for mode, want := range map[helmv2.DriftDetectionMode]int{
		helmv2.DriftDetectionEnabled:  1,
		helmv2.DriftDetectionWarn:     0,
		helmv2.DriftDetectionDisabled: 0,
	} {
		obj := testRelease(func(o *v2.HelmRelease) {
			o.Spec.DriftDetection = &helmv2.DriftDetection{Mode: mode}
		})
		r := newRunner(memoryConfig(), obj, Settings{OverrideManagers: []string{"kubectl-edit"}})
		if got := len(r.driftOptions().OverrideManagers); got != want {
			t.Errorf("%s: %d override managers, want %d", mode, got, want)
		}
	}
}

// Test runs the release's test hooks with the plan of a test: none here,
// so the release comes back as it is.
func TestTestRunsWithTheTestPlan(t *testing.T) {
	r := actionRunner(testRelease(), Settings{})
	if _, err := r.Test(t.Context()); err == nil {
		t.Error("tested a release that is not there")
	}
	if _, err := r.Install(t.Context(), configMapChart("1.0.0"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	rel, err := r.Test(t.Context())
	if err != nil || rel.Version != 1 {
		t.Errorf("test: %v, %v", rel, err)
	}
	if p := r.planFor(plan.Test); p.Recreate != nil || p.HookOrder != "" || p.Ordering.Ordered() {
		t.Errorf("a test plans more than its timeout: %s", p)
	}
}

// An uninstall removes the release's records; another uninstall of the
// release now gone succeeds, as the state machine expects of a release
// that is not there.
func TestUninstallRemovesTheRelease(t *testing.T) {
	r := actionRunner(testRelease(), Settings{})
	if _, err := r.Install(t.Context(), configMapChart("1.0.0"), nil, ownrevision.Mark{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Uninstall(t.Context()); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if all, _ := r.cfg.Releases.ListReleases(); len(all) != 0 {
		t.Errorf("%d records left", len(all))
	}
	if err := r.Uninstall(t.Context()); err != nil {
		t.Errorf("uninstall of a release that is gone: %v", err)
	}
	if r.LastWritten() != nil {
		t.Error("the write log still names a record the uninstall deleted")
	}
}
