package controller

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// TestComposeValues checks that values that cannot be composed are
// reported as upstream reports them: Ready=False with reason ValuesError,
// the resolver's message as it is, and a Warning event of that reason.
func TestComposeValues(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "vals"},
		Data: map[string]string{"values.yaml": "replicas: 2\n"}}
	cases := []struct {
		name      string
		refs      []helmv2.ValuesReference
		wantErr   string
		wantValue any
	}{
		{name: "present", refs: []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "vals"}}, wantValue: float64(2)},
		{name: "missing optional", refs: []helmv2.ValuesReference{{Kind: "Secret", Name: "missing", Optional: true}}},
		{name: "missing", refs: []helmv2.ValuesReference{{Kind: "Secret", Name: "missing"}},
			wantErr: "could not resolve Secret chart values reference 'apps/missing' with key 'values.yaml'"},
		{name: "missing key", refs: []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "vals", ValuesKey: "other.yaml"}},
			wantErr: "other.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(cm.DeepCopy()).Build()
			recorder := eventlog.New(10)
			r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: recorder}
			obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app"}}
			obj.Spec.ValuesFrom = tc.refs

			values, err := r.composeValues(context.Background(), obj)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got := values["replicas"]; tc.wantValue != nil && got != tc.wantValue {
					t.Errorf("replicas = %v, want %v", got, tc.wantValue)
				}
				if conditions.Has(obj, meta.ReadyCondition) {
					t.Errorf("Ready set on success: %+v", conditions.Get(obj, meta.ReadyCondition))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			ready := conditions.Get(obj, meta.ReadyCondition)
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "ValuesError" || ready.Message != err.Error() {
				t.Fatalf("Ready = %+v, want False/ValuesError with message %q", ready, err.Error())
			}
			select {
			case e := <-recorder.Events:
				if !strings.HasPrefix(e, corev1.EventTypeWarning+" ValuesError ") {
					t.Errorf("event %q, want a Warning ValuesError", e)
				}
			default:
				t.Error("no event recorded")
			}
		})
	}
}
