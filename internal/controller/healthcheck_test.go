package controller

import (
	"errors"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/healthcheck"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

func TestInvalidHealthCheckExprsStall(t *testing.T) {
	tests := []struct {
		name    string
		exprs   []kustomize.CustomHealthCheck
		wantErr string
	}{
		{name: "syntax error", wantErr: "failed to parse the expression Current",
			exprs: []kustomize.CustomHealthCheck{{APIVersion: "example.com/v1", Kind: "Thing",
				HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.ready =="}}}},
		{name: "duplicate kind", wantErr: "duplicate custom health check",
			exprs: []kustomize.CustomHealthCheck{
				{APIVersion: "example.com/v1", Kind: "Thing", HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "true"}},
				{APIVersion: "example.com/v2", Kind: "Thing", HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "false"}},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
			obj.Spec.HealthCheckExprs = tt.exprs
			_, err := healthcheck.Compile(obj.Spec.HealthCheckExprs)
			if err == nil {
				t.Fatal("Compile accepted invalid expressions")
			}
			recorder := eventlog.New(1)
			r := &HelmReleaseReconciler{EventRecorder: recorder}
			conditions.MarkReconciling(obj, meta.ProgressingReason, "reconciliation in progress")
			res, rerr := r.stallOnInvalidSpec(obj, helmv2.ActionHealthCheck, meta.InvalidCELExpressionReason, err)
			if !errors.Is(rerr, ctrlreconcile.TerminalError(nil)) || !res.IsZero() {
				t.Fatalf("result %+v, %v; want no requeue and a terminal error, as upstream (a spec change starts the next reconcile)", res, rerr)
			}
			for _, c := range []string{meta.StalledCondition, meta.ReadyCondition} {
				got := conditions.Get(obj, c)
				if got == nil || got.Reason != meta.InvalidCELExpressionReason || !strings.Contains(got.Message, tt.wantErr) {
					t.Errorf("%s condition %+v, want reason %s naming %q", c, got, meta.InvalidCELExpressionReason, tt.wantErr)
				}
			}
			if !conditions.IsTrue(obj, meta.StalledCondition) || !conditions.IsFalse(obj, meta.ReadyCondition) || conditions.Has(obj, meta.ReconcilingCondition) {
				t.Errorf("conditions %+v, want Stalled=True, Ready=False and no Reconciling", obj.Status.Conditions)
			}
			select {
			case e := <-recorder.Events:
				if !strings.HasPrefix(e, "Warning "+meta.InvalidCELExpressionReason) || !strings.Contains(e, tt.wantErr) {
					t.Errorf("event %q", e)
				}
			default:
				t.Error("no event")
			}
		})
	}
}
