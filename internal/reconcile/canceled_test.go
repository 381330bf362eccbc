package reconcile

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestCanceledWait follows an upgrade whose readiness wait a new reconcile
// request cancelled: the revision is failed and counted, nothing is
// remediated in that reconcile, and the next one either upgrades the new
// desired state or, when nothing changed, remediates as the spec says.
func TestCanceledWait(t *testing.T) {
	canceledErr := &HealthCheckCanceledError{Trigger: "HelmChart/flux-system/default-app", Err: context.Canceled}
	tests := []struct {
		name string
		// change is applied before the reconcile that follows the
		// cancelled one.
		change    func(h *harness)
		wantCalls []string
		wantErr   error
		wantReady string
		wantStore []string
	}{
		{
			name:      "new revision upgrades",
			change:    func(h *harness) { h.chart = newFakeChart("podinfo", "6.2.0") },
			wantCalls: []string{"upgrade"},
			wantReady: helmv2.UpgradeSucceededReason,
			wantStore: []string{"superseded", "failed", "deployed"},
		},
		{
			name:      "same desired state remediates",
			change:    func(*harness) {},
			wantCalls: []string{"rollback"},
			wantErr:   ErrRetriesExhausted,
			wantReady: helmv2.RollbackSucceededReason,
			wantStore: []string{"superseded", "failed", "deployed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(func(o *v2.HelmRelease) {
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{
					Retries: 0, RemediateLastFailure: ptr.To(true)}}}
			})
			h.mustRun(t)
			h.takeCalls()

			h.chart = newFakeChart("podinfo", "6.1.0")
			h.helm.fail["upgrade"] = canceledErr
			err := h.run(t)
			var got *HealthCheckCanceledError
			if !errors.As(err, &got) {
				t.Fatalf("cancelled reconcile returned %v, want a HealthCheckCanceledError", err)
			}
			if calls := h.takeCalls(); !reflect.DeepEqual(calls, []string{"upgrade"}) {
				t.Fatalf("cancelled reconcile ran %v, want only the upgrade (no remediation)", calls)
			}
			wantCondition(t, h, helmv2.ReleasedCondition, metav1.ConditionFalse, meta.HealthCheckCanceledReason)
			wantCondition(t, h, meta.ReadyCondition, metav1.ConditionFalse, meta.HealthCheckCanceledReason)
			if msg := conditions.GetMessage(h.obj, meta.ReadyCondition); !strings.Contains(msg, "New reconciliation triggered by HelmChart/flux-system/default-app") {
				t.Errorf("condition message %q", msg)
			}
			if h.obj.Status.UpgradeFailures != 1 {
				t.Errorf("upgrade failures %d, want the cancelled upgrade counted", h.obj.Status.UpgradeFailures)
			}
			last := h.recorder.events[len(h.recorder.events)-1]
			if last.Type != corev1.EventTypeNormal || last.Reason != meta.HealthCheckCanceledReason ||
				!strings.Contains(last.Message, "Health checks canceled due to new reconciliation triggered by HelmChart/flux-system/default-app") {
				t.Errorf("last event %+v", last)
			}

			delete(h.helm.fail, "upgrade")
			tt.change(h)
			err = h.run(t)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("next reconcile returned %v, want %v", err, tt.wantErr)
			}
			if calls := h.takeCalls(); !reflect.DeepEqual(calls, tt.wantCalls) {
				t.Errorf("next reconcile ran %v, want %v", calls, tt.wantCalls)
			}
			var store []string
			for _, r := range h.helm.releases {
				store = append(store, string(r.Info.Status))
			}
			if !reflect.DeepEqual(store, tt.wantStore) {
				t.Errorf("storage %v, want %v", store, tt.wantStore)
			}
			wantReady := metav1.ConditionTrue
			if tt.wantErr != nil {
				wantReady = metav1.ConditionFalse
			}
			wantCondition(t, h, meta.ReadyCondition, wantReady, tt.wantReady)
		})
	}
}
