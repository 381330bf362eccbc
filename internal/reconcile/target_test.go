package reconcile

import (
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
