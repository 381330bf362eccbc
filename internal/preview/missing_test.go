package preview_test

import (
	"context"
	"slices"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// An object the upgrade drops from the release is deleted only when it is
// in the cluster: Helm passes over what it does not find. Found by the
// harness: a release whose install failed in a pre-install hook (so none
// of its objects was made), planned as deleting a Job its upgrade
// renamed. Without a lookup (the controller's own plans) the plan cannot
// tell, and lists every dropped object as deleted.
func TestPreviewDeletesOnlyWhatTheClusterHas(t *testing.T) {
	e := newEnv(t, nil)
	obj := e.hr()
	e.reconcile(obj, func() *chartv2.Chart {
		return testChart("1.0.0", configMap("app"), configMap("dropped"), configMap("gone"))
	}, values("a", "1"))
	if err := e.cs.CoreV1().ConfigMaps(e.ns).Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := func() *chartv2.Chart { return testChart("1.0.1", configMap("app")) }

	var looked []string
	lookup := func(ctx context.Context, apiVersion, kind, namespace, name string) (bool, error) {
		looked = append(looked, apiVersion+" "+kind+" "+namespace+"/"+name)
		if apiVersion != "v1" || kind != "ConfigMap" {
			t.Errorf("looked up %s %s, want v1 ConfigMap", apiVersion, kind)
		}
		_, err := e.cs.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	pv, err := preview.Compute(context.Background(), preview.Input{
		Object: obj.DeepCopy(), Chart: next(), Values: values("a", "1"), Helm: e.runner(obj.DeepCopy()), Lookup: lookup,
	})
	if err != nil {
		t.Fatal(err)
	}
	objs := pv.Actions[0].Objects
	if got := names(objs.Delete); !slices.Equal(got, []string{"ConfigMap/dropped"}) {
		t.Errorf("objects to delete %v, want only ConfigMap/dropped (looked up %v)", got, looked)
	}
	if got := names(objs.Absent); !slices.Equal(got, []string{"ConfigMap/gone"}) {
		t.Errorf("objects absent %v, want ConfigMap/gone", got)
	}
	if !slices.Contains(looked, "v1 ConfigMap "+e.ns+"/gone") {
		t.Errorf("looked up %v: not ConfigMap/gone in the release's namespace", looked)
	}

	blind := e.preview(obj, next(), values("a", "1")).Actions[0].Objects
	if got := names(blind.Delete); !slices.Equal(got, []string{"ConfigMap/dropped", "ConfigMap/gone"}) {
		t.Errorf("without a lookup: objects to delete %v, want both dropped ConfigMaps", got)
	}
}
