package controller

import (
	"context"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// TestChartTemplateAppliedOnlyWhenItCanDiffer: once an apply found the
// HelmChart of a chart template as the template asks, a reconcile that
// finds it so in the cache sends no apply; a change by someone else to its
// spec, labels or annotations, its deletion, or a change of the template
// is applied again, on a real API server.
func TestChartTemplateAppliedOnlyWhenItCanDiffer(t *testing.T) {
	ctx := context.Background()
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "skip"}}
	hr.Spec.Interval = metav1.Duration{Duration: 60_000_000_000}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo", Version: "6.x",
		SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	plain, err := client.NewWithWatch(apiServer(t), client.Options{Scheme: newRevisionScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	writes := 0
	c := interceptor.NewClient(plain, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, p, opts...)
		},
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			writes++
			return c.Apply(ctx, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			writes++
			return c.Create(ctx, obj, opts...)
		},
	})
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: eventlog.New(20), FieldManager: ControllerName}
	key := client.ObjectKey{Namespace: "apps", Name: "apps-skip"}
	edit := func(change func(*sourcev1.HelmChart)) func() {
		return func() {
			var chart sourcev1.HelmChart
			if err := plain.Get(ctx, key, &chart); err != nil {
				t.Fatal(err)
			}
			change(&chart)
			if err := plain.Update(ctx, &chart); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name string
		// before changes what the reconcile finds.
		before func()
		// wantSent: an apply request (dry run or not) reached the server.
		wantSent bool
		wantSpec string
	}{
		{name: "create", wantSent: true, wantSpec: "6.x"},
		{name: "found unchanged by an apply", wantSent: true, wantSpec: "6.x"},
		{name: "unchanged since", wantSpec: "6.x"},
		{name: "spec changed by hand", before: edit(func(c *sourcev1.HelmChart) { c.Spec.Version = "1.x" }), wantSent: true, wantSpec: "6.x"},
		{name: "found unchanged again", wantSent: true, wantSpec: "6.x"},
		{name: "a label removed by hand", before: edit(func(c *sourcev1.HelmChart) { delete(c.Labels, "helm.toolkit.fluxcd.io/name") }),
			wantSent: true, wantSpec: "6.x"},
		{name: "recorded", wantSent: true, wantSpec: "6.x"},
		{name: "nothing to do", wantSpec: "6.x"},
		{name: "template changed", before: func() { hr.Spec.Chart.Spec.Version = "7.x" }, wantSent: true, wantSpec: "7.x"},
		{name: "deleted", before: func() {
			if err := plain.Delete(ctx, &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil {
				t.Fatal(err)
			}
		}, wantSent: true, wantSpec: "7.x"},
	}
	for _, step := range steps {
		if step.before != nil {
			step.before()
		}
		writes = 0
		if err := r.reconcileChartTemplate(ctx, hr); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if sent := writes > 0; sent != step.wantSent {
			t.Errorf("%s: apply sent: %v, want %v", step.name, sent, step.wantSent)
		}
		var chart sourcev1.HelmChart
		if err := plain.Get(ctx, key, &chart); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if chart.Spec.Version != step.wantSpec || chart.Labels["helm.toolkit.fluxcd.io/name"] != "skip" {
			t.Errorf("%s: HelmChart version %q labels %v, want %q and the owner labels", step.name, chart.Spec.Version, chart.Labels, step.wantSpec)
		}
	}
}
