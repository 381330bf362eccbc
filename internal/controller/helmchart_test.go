package controller

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestChartTemplateLabelsAndEvents checks what upstream users see of the
// HelmChart a chart template makes: the owner labels naming the
// HelmRelease, next to the template's own labels, and an event when the
// HelmChart is created, changed or deleted, none when it is unchanged.
func TestChartTemplateLabelsAndEvents(t *testing.T) {
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
	hr.Spec.Interval = metav1.Duration{Duration: 60_000_000_000}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{
		ObjectMeta: &helmv2.HelmChartTemplateObjectMeta{Labels: map[string]string{"team": "a"}},
		Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo", Version: "6.x",
			SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}},
	}
	c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).Build()
	recorder := record.NewFakeRecorder(10)
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: recorder}

	steps := []struct {
		name      string
		mutate    func(*v2.HelmRelease)
		wantEvent string
	}{
		{name: "create", wantEvent: "HelmChartCreated Created HelmChart/apps/apps-web with SourceRef 'HelmRepository/apps/charts'"},
		{name: "unchanged"},
		{name: "change", mutate: func(o *v2.HelmRelease) { o.Spec.Chart.Spec.Version = "7.x" },
			wantEvent: "HelmChartConfigured Configured HelmChart/apps/apps-web with SourceRef 'HelmRepository/apps/charts'"},
		{name: "delete", wantEvent: "HelmChartDeleted deleted HelmChart 'apps/apps-web'"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if step.mutate != nil {
				step.mutate(hr)
			}
			var err error
			if step.name == "delete" {
				err = r.deleteChartTemplate(context.Background(), hr)
			} else {
				err = r.reconcileChartTemplate(context.Background(), hr)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for len(recorder.Events) > 0 {
				got = append(got, <-recorder.Events)
			}
			if step.wantEvent == "" {
				if len(got) != 0 {
					t.Errorf("events %q, want none", got)
				}
			} else if len(got) != 1 || !strings.HasSuffix(got[0], " "+step.wantEvent) {
				t.Errorf("events %q, want one ending in %q", got, step.wantEvent)
			}
			if step.name == "delete" {
				return
			}
			var chart sourcev1.HelmChart
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: "apps-web"}, &chart); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"team": "a", "helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "apps"}
			for k, v := range want {
				if chart.Labels[k] != v {
					t.Errorf("label %s=%q, want %q (labels %v)", k, chart.Labels[k], v, chart.Labels)
				}
			}
		})
	}
}
