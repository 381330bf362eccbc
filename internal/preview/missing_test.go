package preview_test

import (
	"context"
	"slices"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/preview"
)

// An object of the stored release that is not in the cluster (deleted by
// hand, or never made: an install that failed in a pre-install hook
// applies nothing) is created by the upgrade, not updated: Helm creates
// what it does not find. The plan says create, and the upgrade does
// create it. Found by the harness: a failed install's upgrade, planned
// as an update of its ConfigMap.
func TestPreviewCreatesWhatTheClusterLacks(t *testing.T) {
	e := newEnv(t, nil)
	chrt := func() *chartv2.Chart { return testChart("1.0.0", configMap("app"), configMap("other")) }
	obj := e.hr()
	e.reconcile(obj, chrt, values("a", "1"))
	if err := e.cs.CoreV1().ConfigMaps(e.ns).Delete(context.Background(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	pv := e.preview(obj, chrt(), values("a", "2"))
	if len(pv.Actions) != 1 {
		t.Fatalf("step %s with %d actions, want an upgrade", pv.Step, len(pv.Actions))
	}
	objs := pv.Actions[0].Objects
	if got := names(objs.Create); !slices.Equal(got, []string{"ConfigMap/app"}) {
		t.Errorf("objects to create %v, want ConfigMap/app, which the cluster lacks", got)
	}
	if got := names(objs.Update); !slices.Equal(got, []string{"ConfigMap/other"}) {
		t.Errorf("objects to update %v, want ConfigMap/other", got)
	}
	if len(objs.Create) == 1 && !slices.Contains(objs.Create[0].Live, preview.LiveMissing) {
		t.Errorf("ConfigMap/app's live note %q lacks %q", objs.Create[0].Live, preview.LiveMissing)
	}

	e.reconcile(obj, chrt, values("a", "2"))
	if _, err := e.cs.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "app", metav1.GetOptions{}); err != nil {
		t.Errorf("the upgrade did not create ConfigMap/app as the plan said: %v", err)
	}
}
