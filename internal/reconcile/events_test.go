package reconcile

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	"helm.sh/helm/v4/pkg/release/common"

	v2 "github.com/afterhooks/helm-controller/api/v2"
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

// A rollback's outcome reads the same whether the rollback ran in this
// reconcile or its readiness wait was resumed after a restart: upstream's
// wording, naming the revision rolled back to (default/app.v1), not the
// revision the rollback wrote.
func TestRollbackEventsNameTheTarget(t *testing.T) {
	const target = "default/app.v1 with chart podinfo@6.0.0"
	cases := []struct {
		name       string
		resumed    bool
		failure    error
		wantType   string
		wantReason string
		wantMsg    string
	}{
		{name: "rollback succeeds", wantType: "Normal", wantReason: helmv2.RollbackSucceededReason,
			wantMsg: "Helm rollback to previous release " + target + " succeeded"},
		{name: "rollback fails", failure: errors.New("pre-rollback hook failed"), wantType: "Warning", wantReason: helmv2.RollbackFailedReason,
			wantMsg: "Helm rollback to previous release " + target + " failed: pre-rollback hook failed"},
		{name: "resumed rollback succeeds", resumed: true, wantType: "Normal", wantReason: helmv2.RollbackSucceededReason,
			wantMsg: "Helm rollback to previous release " + target + " succeeded"},
		{name: "resumed rollback fails", resumed: true, failure: errors.New("Deployment/default/app: InProgress"), wantType: "Warning", wantReason: helmv2.RollbackFailedReason,
			wantMsg: "Helm rollback to previous release " + target + " failed: Deployment/default/app: InProgress"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
				o.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
			})
			h.mustRun(t) // v1 deployed
			h.chart = newFakeChart("podinfo", "6.1.0")
			h.helm.fail["upgrade"] = errors.New("deployment not ready")
			if tc.resumed {
				startRollbackThenStop(t, h)
				h.helm.fail = map[string]error{"resume": tc.failure}
			} else {
				h.helm.fail["rollback"] = tc.failure
			}
			h.recorder.events = nil
			_ = h.run(t)

			var got []recordedEvent
			for _, e := range h.recorder.events {
				if e.Action == helmv2.ActionHelmRollback.String() {
					got = append(got, e)
				}
			}
			if len(got) != 1 || got[0].Type != tc.wantType || got[0].Reason != tc.wantReason || got[0].Message != tc.wantMsg {
				t.Fatalf("rollback events %+v, want one %s %s %q", got, tc.wantType, tc.wantReason, tc.wantMsg)
			}
			if c := conditions.Get(h.obj, helmv2.RemediatedCondition); c == nil || c.Reason != tc.wantReason || c.Message != tc.wantMsg {
				t.Errorf("Remediated %+v, want %s %q", c, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

// startRollbackThenStop runs a reconcile whose upgrade fails and whose
// remediating rollback the controller stops in, during its afterHooks
// readiness wait: storage is left with the rollback's revision pending and
// marked, for the next reconcile to resume.
func startRollbackThenStop(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	good := h.helm.releases[0]
	h.helm.onRollback = func() {
		h.helm.newRelease(good.Chart, good.Config, common.StatusPendingRollback).Info.Description = awaitingMarker(h.helm.now.Add(time.Hour))
		cancel()
	}
	h.helm.fail["rollback"] = context.Canceled
	h.helm.written = nil
	m := &Machine{Helm: h.helm, Recorder: h.recorder}
	if err := m.Run(ctx, h.request()); err == nil {
		t.Fatal("the failed upgrade was not reported")
	}
	h.helm.onRollback = nil
	if got := h.takeCalls(); !slices.Equal(got, []string{"install", "upgrade", "rollback"}) {
		t.Fatalf("calls %v, want the install, the failed upgrade and the rollback stopped in its wait", got)
	}
}
