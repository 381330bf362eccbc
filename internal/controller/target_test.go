package controller

import (
	"reflect"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
)

// TestReleaseTargetChanged checks when a change of spec.releaseName,
// spec.targetNamespace or spec.storageNamespace moves the release away from
// the one the status records, and that the previous target names that
// recorded release (its name and storage namespace), so it can be
// uninstalled before the new one is made. Helm's default namespace stays the
// one the spec names now, as upstream's uninstall has it.
func TestReleaseTargetChanged(t *testing.T) {
	released := func(mutate func(*v2.HelmRelease)) *v2.HelmRelease {
		obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
		obj.Status.StorageNamespace = "apps"
		obj.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, ChartName: "podinfo"}}
		if mutate != nil {
			mutate(obj)
		}
		return obj
	}
	cases := []struct {
		name        string
		obj         *v2.HelmRelease
		wantChanged bool
		// wantNamespace is Helm's default namespace for the uninstall;
		// "" means apps, the recorded one.
		wantNamespace string
	}{
		{name: "unchanged", obj: released(nil)},
		{name: "never released", obj: released(func(o *v2.HelmRelease) { o.Status = v2.HelmReleaseStatus{} })},
		{name: "no history", obj: released(func(o *v2.HelmRelease) { o.Status.History = nil })},
		{name: "explicit names equal to the defaults", obj: released(func(o *v2.HelmRelease) {
			o.Spec.ReleaseName, o.Spec.StorageNamespace = "web", "apps"
		})},
		{name: "release name", obj: released(func(o *v2.HelmRelease) { o.Spec.ReleaseName = "frontend" }), wantChanged: true},
		{name: "target namespace", obj: released(func(o *v2.HelmRelease) {
			// The default release name follows the target namespace; keep
			// it so that only the namespace differs.
			o.Spec.TargetNamespace, o.Spec.ReleaseName = "prod", "web"
		}), wantChanged: true, wantNamespace: "prod"},
		{name: "target namespace with the default release name", obj: released(func(o *v2.HelmRelease) {
			o.Spec.TargetNamespace = "prod"
		}), wantChanged: true, wantNamespace: "prod"},
		{name: "storage namespace", obj: released(func(o *v2.HelmRelease) { o.Spec.StorageNamespace = "helm" }), wantChanged: true},
		{name: "chart name is not a target", obj: released(func(o *v2.HelmRelease) { o.Status.History[0].ChartName = "other" })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason := releaseTargetChanged(tc.obj)
			if (reason != "") != tc.wantChanged {
				t.Fatalf("releaseTargetChanged = %q, want changed=%v", reason, tc.wantChanged)
			}
			if !tc.wantChanged {
				return
			}
			before := tc.obj.DeepCopy()
			prev := previousTarget(tc.obj)
			if !reflect.DeepEqual(before, tc.obj) {
				t.Error("previousTarget changed the HelmRelease it was given")
			}
			up := prev.Upstream()
			if got := action.ReleaseName(prev); got != "web" {
				t.Errorf("previous release name %q, want web", got)
			}
			wantNamespace := tc.wantNamespace
			if wantNamespace == "" {
				wantNamespace = "apps"
			}
			if got := up.GetReleaseNamespace(); got != wantNamespace {
				t.Errorf("Helm's default namespace for the uninstall %q, want %s", got, wantNamespace)
			}
			if got := up.GetStorageNamespace(); got != "apps" {
				t.Errorf("previous storage namespace %q, want apps", got)
			}
		})
	}
}
