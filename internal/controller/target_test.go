package controller

import (
	"reflect"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestPreviousTarget: the release uninstalled before a moved one is made is
// the one the status records (its name and storage namespace), with the
// namespace the spec names now as Helm's default, as upstream's uninstall
// has it.
func TestPreviousTarget(t *testing.T) {
	released := func(mutate func(*v2.HelmRelease)) *v2.HelmRelease {
		obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
		obj.Status.StorageNamespace = "apps"
		obj.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, ChartName: "podinfo"}}
		mutate(obj)
		return obj
	}
	cases := []struct {
		name          string
		obj           *v2.HelmRelease
		wantNamespace string
	}{
		{name: "release name", obj: released(func(o *v2.HelmRelease) { o.Spec.ReleaseName = "frontend" }), wantNamespace: "apps"},
		{name: "target namespace", obj: released(func(o *v2.HelmRelease) {
			o.Spec.TargetNamespace, o.Spec.ReleaseName = "prod", "web"
		}), wantNamespace: "prod"},
		{name: "target namespace with the default release name", obj: released(func(o *v2.HelmRelease) {
			o.Spec.TargetNamespace = "prod"
		}), wantNamespace: "prod"},
		{name: "storage namespace", obj: released(func(o *v2.HelmRelease) { o.Spec.StorageNamespace = "helm" }), wantNamespace: "apps"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.obj.DeepCopy()
			prev := previousTarget(tc.obj)
			if !reflect.DeepEqual(before, tc.obj) {
				t.Error("previousTarget changed the HelmRelease it was given")
			}
			up := prev.Upstream()
			if got := v2.ReleaseName(prev); got != "web" {
				t.Errorf("previous release name %q, want web", got)
			}
			if got := up.GetReleaseNamespace(); got != tc.wantNamespace {
				t.Errorf("Helm's default namespace for the uninstall %q, want %s", got, tc.wantNamespace)
			}
			if got := up.GetStorageNamespace(); got != "apps" {
				t.Errorf("previous storage namespace %q, want apps", got)
			}
		})
	}
}
