package reconcile

import (
	"reflect"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestTargetChanged: when a change of spec.releaseName,
// spec.targetNamespace, spec.storageNamespace or of the chart's name moves
// the release away from the one the status records.
func TestTargetChanged(t *testing.T) {
	released := func(mutate func(*v2.HelmRelease)) *v2.HelmRelease {
		obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
		obj.Status.StorageNamespace = "apps"
		obj.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, ChartName: "podinfo"}}
		if mutate != nil {
			mutate(obj)
		}
		return obj
	}
	inPlace := func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{ChartNameChangeStrategy: helmv2.ChartNameChangeStrategyInPlaceUpdate}}
	}
	cases := []struct {
		name  string
		obj   *v2.HelmRelease
		chart string
		want  string
	}{
		{name: "unchanged", obj: released(nil)},
		{name: "never released", obj: released(func(o *v2.HelmRelease) { o.Status = v2.HelmReleaseStatus{} }), chart: "other"},
		{name: "no history", obj: released(func(o *v2.HelmRelease) { o.Status.History = nil }), chart: "other"},
		{name: "explicit names equal to the defaults", obj: released(func(o *v2.HelmRelease) {
			o.Spec.ReleaseName, o.Spec.StorageNamespace = "web", "apps"
		})},
		{name: "release name", obj: released(func(o *v2.HelmRelease) { o.Spec.ReleaseName = "frontend" }),
			want: "release name changed from 'web' to 'frontend'"},
		{name: "target namespace", obj: released(func(o *v2.HelmRelease) {
			// The default release name follows the target namespace; keep
			// it so that only the namespace differs.
			o.Spec.TargetNamespace, o.Spec.ReleaseName = "prod", "web"
		}), want: "release namespace changed from 'apps' to 'prod'"},
		{name: "storage namespace", obj: released(func(o *v2.HelmRelease) { o.Spec.StorageNamespace = "helm" }),
			want: "storage namespace changed from 'apps' to 'helm'"},
		{name: "chart renamed, Reinstall by default", obj: released(nil), chart: "podinfo-ng",
			want: "chart renamed from 'podinfo' to 'podinfo-ng' (chartNameChangeStrategy Reinstall)"},
		{name: "chart renamed while the last release failed", obj: released(func(o *v2.HelmRelease) {
			o.Status.History[0].Status = "failed"
		}), chart: "podinfo-ng", want: "chart renamed from 'podinfo' to 'podinfo-ng' (chartNameChangeStrategy Reinstall)"},
		{name: "chart renamed, InPlaceUpdate", obj: released(inPlace), chart: "podinfo-ng"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chart := tc.chart
			if chart == "" {
				chart = "podinfo"
			}
			if got := TargetChanged(tc.obj, chart); got != tc.want {
				t.Errorf("TargetChanged = %q, want %q", got, tc.want)
			}
		})
	}
}

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
			prev := PreviousTarget(tc.obj)
			if !reflect.DeepEqual(before, tc.obj) {
				t.Error("PreviousTarget changed the HelmRelease it was given")
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
