package reconcile

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

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
		if got := rec.events[i]; got.Type != want[i].Type || got.Reason != want[i].Reason || got.Message != want[i].Message || got.Action != want[i].Action {
			t.Errorf("event %d = %+v, want %+v", i, rec.events[i], want[i])
		}
	}
}
