package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// runAndLoseTheStatus runs a reconcile whose controller dies right after
// Helm stored the last revision: the API server keeps the status as the
// last announce wrote it (Progress, before the Helm action ran), nothing
// of what the reconcile recorded afterwards.
func runAndLoseTheStatus(t *testing.T, h *harness) {
	t.Helper()
	h.helm.written = nil
	var announced *v2.HelmReleaseStatus
	m := &Machine{Helm: h.helm, Recorder: h.recorder, Progress: func(string) {
		announced = h.obj.Status.DeepCopy()
	}}
	_ = m.Run(context.Background(), h.request())
	if announced == nil {
		t.Fatal("no action was announced")
	}
	h.obj.Status = *announced
}

// historyVersions lists the versions status.history holds, newest first.
func historyVersions(h *harness) []int {
	var versions []int
	for _, s := range h.obj.Status.History {
		versions = append(versions, s.Version)
	}
	return versions
}

// A revision in storage right after the history's latest is recorded as
// the controller's own only when the controller made it: one it made and
// did not record before it died is finished, not made again. One made by
// hand with the helm CLI (a rollback of a failed release, an upgrade with
// the same chart and values) is a release the HelmRelease did not make,
// and is upgraded over, as upstream does, whatever its description, chart
// and values.
func TestOnlyOwnRevisionsAreRecorded(t *testing.T) {
	upgradeRollsBack := func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
			Remediation: &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptrTo(true)},
		}}
	}
	failedUpgrade := func(t *testing.T, h *harness) {
		h.mustRun(t) // v1
		h.values = map[string]any{"replicas": 2}
		h.obj.Generation = 2
		h.helm.fail["upgrade"] = errors.New("readiness wait failed")
		if err := h.run(t); err == nil {
			t.Fatal("the failed upgrade was not reported")
		}
	}
	cases := []struct {
		name   string
		mutate []func(*v2.HelmRelease)
		setup  func(*testing.T, *harness)
		// Then a reconcile: its prediction, its Helm calls, the history
		// and conditions it leaves.
		want         Step
		calls        []string
		history      []int
		latestAction helmv2.ReleaseAction
		ready        metav1.ConditionStatus
		readyReason  string
		remediated   string // the Remediated reason; "" for none
	}{
		{
			name: "helm rollback by hand of a failed upgrade",
			setup: func(t *testing.T, h *harness) {
				failedUpgrade(t, h) // v2 failed, the upgrade's retries used up
				h.helm.rollbackByHand(1)
			},
			// The upgrade still fails: a fourth revision, as upstream.
			want: StepUpgrade, calls: []string{"upgrade"}, history: []int{4},
			latestAction: helmv2.ReleaseActionUpgrade,
			ready:        metav1.ConditionFalse, readyReason: helmv2.UpgradeFailedReason,
		},
		{
			name:   "helm rollback by hand of a failed upgrade, rollback remediation configured",
			mutate: []func(*v2.HelmRelease){upgradeRollsBack},
			setup: func(t *testing.T, h *harness) {
				failedUpgrade(t, h) // v2 failed, v3 the rollback
				h.helm.rollbackByHand(3)
				delete(h.helm.fail, "upgrade")
			},
			want: StepUpgrade, calls: []string{"upgrade"}, history: []int{5},
			latestAction: helmv2.ReleaseActionUpgrade,
			ready:        metav1.ConditionTrue, readyReason: helmv2.UpgradeSucceededReason,
		},
		{
			name: "helm upgrade by hand with the desired chart and values",
			setup: func(t *testing.T, h *harness) {
				h.mustRun(t) // v1
				last := h.helm.last()
				h.helm.upgradeByHand(last.Chart, last.Config)
			},
			want: StepUpgrade, calls: []string{"upgrade"}, history: []int{3},
			latestAction: helmv2.ReleaseActionUpgrade,
			ready:        metav1.ConditionTrue, readyReason: helmv2.UpgradeSucceededReason,
		},
		{
			name: "helm upgrade by hand over an upgrade of the controller",
			setup: func(t *testing.T, h *harness) {
				h.mustRun(t) // v1
				h.values = map[string]any{"replicas": 2}
				h.obj.Generation = 2
				h.mustRun(t) // v2
				last := h.helm.last()
				h.helm.upgradeByHand(last.Chart, last.Config)
			},
			want: StepUpgrade, calls: []string{"upgrade"}, history: []int{4},
			latestAction: helmv2.ReleaseActionUpgrade,
			ready:        metav1.ConditionTrue, readyReason: helmv2.UpgradeSucceededReason,
		},
		{
			name: "an upgrade of the controller, which died before recording it",
			setup: func(t *testing.T, h *harness) {
				h.mustRun(t) // v1
				h.values = map[string]any{"replicas": 2}
				h.obj.Generation = 2
				runAndLoseTheStatus(t, h) // v2
			},
			want: StepRecord, history: []int{2, 1},
			latestAction: helmv2.ReleaseActionUpgrade,
			ready:        metav1.ConditionTrue, readyReason: helmv2.UpgradeSucceededReason,
		},
		{
			name: "an upgrade of the controller taking over a release made by hand, which died before recording it",
			setup: func(t *testing.T, h *harness) {
				h.mustRun(t) // v1
				last := h.helm.last()
				h.helm.upgradeByHand(last.Chart, map[string]any{"replicas": 3}) // v2
				runAndLoseTheStatus(t, h)                                       // v3, the history cleared
			},
			want: StepRecord, history: []int{3},
			latestAction: helmv2.ReleaseActionUpgrade,
			ready:        metav1.ConditionTrue, readyReason: helmv2.UpgradeSucceededReason,
		},
		{
			// Upstream reads the install failure as retries used up and
			// installs nothing (docs/differences.md, "An install failure
			// mended by an upgrade"); the retries that count here are
			// those of the last action, the upgrade that succeeded.
			name: "helm uninstall by hand after a failed install that an upgrade mended",
			setup: func(t *testing.T, h *harness) {
				h.helm.fail["install"] = errors.New("readiness wait failed")
				if err := h.run(t); err == nil {
					t.Fatal("the failed install was not reported")
				}
				delete(h.helm.fail, "install")
				last := h.helm.last()
				h.helm.upgradeByHand(last.Chart, last.Config) // v2
				h.mustRun(t)                                  // v3, taken over
				if h.obj.Status.InstallFailures != 1 || h.obj.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionUpgrade {
					t.Fatalf("install failures %d, last action %s: not the state of the scenario",
						h.obj.Status.InstallFailures, h.obj.Status.LastAttemptedReleaseAction)
				}
				h.helm.releases = nil // helm uninstall
			},
			want: StepInstall, calls: []string{"install"}, history: []int{1},
			latestAction: helmv2.ReleaseActionInstall,
			ready:        metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
		},
		{
			name: "an install of the controller, which died before recording it",
			setup: func(t *testing.T, h *harness) {
				runAndLoseTheStatus(t, h) // v1
			},
			want: StepRecord, history: []int{1},
			latestAction: helmv2.ReleaseActionInstall,
			ready:        metav1.ConditionTrue, readyReason: helmv2.InstallSucceededReason,
		},
		{
			name:   "a rollback remediation of the controller, which died before recording it",
			mutate: []func(*v2.HelmRelease){upgradeRollsBack},
			setup: func(t *testing.T, h *harness) {
				h.mustRun(t) // v1
				h.values = map[string]any{"replicas": 2}
				h.obj.Generation = 2
				h.helm.fail["upgrade"] = errors.New("readiness wait failed")
				runAndLoseTheStatus(t, h) // v2 failed, v3 the rollback
			},
			want: StepRecord, history: []int{3, 2, 1},
			latestAction: helmv2.ReleaseActionRollback,
			ready:        metav1.ConditionFalse, readyReason: helmv2.RollbackSucceededReason,
			remediated: helmv2.RollbackSucceededReason,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(tc.mutate...)
			tc.setup(t, h)
			h.takeCalls()

			if next := Predict(h.request(), h.helm.last()); next.Step != tc.want {
				t.Errorf("predicted step %s (%s; %s), want %s", next.Step, next.Reason, next.Why, tc.want)
			}
			_ = h.run(t)
			var calls []string
			for _, c := range h.takeCalls() {
				if c != "detect" {
					calls = append(calls, c)
				}
			}
			if !slices.Equal(calls, tc.calls) {
				t.Fatalf("Helm calls %v, want %v", calls, tc.calls)
			}
			if got := historyVersions(h); !slices.Equal(got, tc.history) {
				t.Errorf("history versions %v, want %v", got, tc.history)
			}
			if latest := h.obj.Status.History.Latest(); latest == nil || latest.Action != tc.latestAction {
				t.Errorf("latest snapshot %+v, want action %s", latest, tc.latestAction)
			}
			wantCondition(t, h, meta.ReadyCondition, tc.ready, tc.readyReason)
			c := conditions.Get(h.obj, helmv2.RemediatedCondition)
			switch {
			case tc.remediated == "" && c != nil:
				t.Errorf("Remediated %s/%s (%s): nothing of this controller was remediated", c.Status, c.Reason, c.Message)
			case tc.remediated != "" && (c == nil || c.Reason != tc.remediated):
				t.Errorf("Remediated %+v, want reason %s", c, tc.remediated)
			}
		})
	}
}
