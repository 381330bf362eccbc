package reconcile

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
)

// Every event reason of the state machine names upstream's v2.Action of the
// step it reports on; notification-controller routes on it.
func TestEventAction(t *testing.T) {
	cases := map[string]helmv2.Action{
		helmv2.InstallSucceededReason:   helmv2.ActionHelmInstall,
		helmv2.InstallFailedReason:      helmv2.ActionHelmInstall,
		helmv2.UpgradeSucceededReason:   helmv2.ActionHelmUpgrade,
		helmv2.UpgradeFailedReason:      helmv2.ActionHelmUpgrade,
		helmv2.TestSucceededReason:      helmv2.ActionHelmTest,
		helmv2.TestFailedReason:         helmv2.ActionHelmTest,
		helmv2.RollbackSucceededReason:  helmv2.ActionHelmRollback,
		helmv2.RollbackFailedReason:     helmv2.ActionHelmRollback,
		helmv2.UninstallSucceededReason: helmv2.ActionHelmUninstall,
		helmv2.UninstallFailedReason:    helmv2.ActionHelmUninstall,
		helmv2.DriftDetectedReason:      helmv2.ActionDriftDetection,
		DriftCorrectedReason:            helmv2.ActionDriftDetection,
		DriftCorrectionFailedReason:     helmv2.ActionDriftDetection,
		DriftDetectionFailedReason:      helmv2.ActionDriftDetection,
		meta.HealthCheckCanceledReason:  helmv2.ActionHealthCheck,
		pendingReleaseReason:            helmv2.ActionUnlock,
		meta.ReconciliationFailedReason: helmv2.ActionReconcile,
		stateErrorReason:                helmv2.ActionReconcile,
	}
	for reason, want := range cases {
		if got := EventAction(reason); got != want {
			t.Errorf("EventAction(%s) = %s, want %s", reason, got, want)
		}
	}
}

// The machine's events reach the recorder with their action.
func TestMachineEventsCarryAction(t *testing.T) {
	h := newHarness()
	rec := h.recorder
	m := &Machine{Recorder: rec}
	req := h.request()
	m.normal(req, nil, helmv2.UpgradeSucceededReason, "upgraded")
	m.warning(req, nil, pendingReleaseReason, "unlocked")
	want := []recordedEvent{
		{Type: "Normal", Reason: helmv2.UpgradeSucceededReason, Message: "upgraded", Action: "HelmUpgrade"},
		{Type: "Warning", Reason: pendingReleaseReason, Message: "unlocked", Action: "Unlock"},
	}
	if len(rec.events) != len(want) {
		t.Fatalf("events %+v, want %+v", rec.events, want)
	}
	for i := range want {
		if rec.events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, rec.events[i], want[i])
		}
	}
}
