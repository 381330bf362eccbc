package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
			SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}},
	}
	c, err := client.New(apiServer(t), client.Options{Scheme: newRevisionScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	recorder := newEventLog(10)
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: recorder, FieldManager: ControllerName}

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
			// Written with server-side apply by upstream's field manager,
			// so either controller can take it over.
			applied := false
			for _, f := range chart.ManagedFields {
				if f.Manager == ControllerName && f.Operation == metav1.ManagedFieldsOperationApply {
					applied = true
				}
				if f.Manager == ControllerName && f.Operation == metav1.ManagedFieldsOperationUpdate {
					t.Errorf("fields still owned by a %s update: %s", f.Manager, f.FieldsV1)
				}
			}
			if !applied {
				t.Errorf("HelmChart not server-side applied by %s: managed fields %+v", ControllerName, chart.ManagedFields)
			}
			if chart.Spec.Version != hr.Spec.Chart.Spec.Version {
				t.Errorf("HelmChart version %q, want %q", chart.Spec.Version, hr.Spec.Chart.Spec.Version)
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

// A HelmChart an older build of this controller wrote with a merge patch is
// taken over by the apply, without a conflict and without leaving fields
// owned by the old update.
func TestChartTemplateTakesOverMergePatchedChart(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(apiServer(t), client.Options{Scheme: newRevisionScheme(t), FieldOwner: ControllerName})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	old := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: "legacy", Name: "legacy-web"},
		Spec: sourcev1.HelmChartSpec{Chart: "podinfo", Version: "5.x", Interval: metav1.Duration{Duration: time.Minute},
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "legacy", Name: "web"}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo", Version: "6.x",
		SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: newEventLog(10), FieldManager: ControllerName}
	if err := r.reconcileChartTemplate(ctx, hr); err != nil {
		t.Fatalf("applying over the merge-patched HelmChart: %v", err)
	}
	var chart sourcev1.HelmChart
	if err := c.Get(ctx, client.ObjectKeyFromObject(old), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Spec.Version != "6.x" {
		t.Errorf("version %q, want 6.x", chart.Spec.Version)
	}
	for _, f := range chart.ManagedFields {
		if f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "" {
			t.Errorf("fields still owned by %s's update: %s", f.Manager, f.FieldsV1)
		}
	}
}
