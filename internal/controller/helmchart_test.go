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
	"github.com/afterhooks/helm-controller/test/eventlog"
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
	recorder := eventlog.New(10)
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
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: eventlog.New(10), FieldManager: ControllerName}
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

// TestChartTemplateOCIRepository follows a template through kind changes as
// upstream v1.7 does: kind OCIRepository makes an OCIRepository named and
// labelled like the HelmChart would be, selecting the Helm chart layer as
// is unless told otherwise, on the template's interval or spec.interval;
// status.helmChart names it as Kind/namespace/name; a change of kind
// deletes the old object by its kind, and so does the move to chartRef.
func TestChartTemplateOCIRepository(t *testing.T) {
	ctx := context.Background()
	c, err := client.New(apiServer(t), client.Options{Scheme: newRevisionScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "oci"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	recorder := eventlog.New(10)
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: recorder, FieldManager: ControllerName}
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "oci", Name: "web"}}
	hr.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{
		Kind:       sourcev1.OCIRepositoryKind,
		ObjectMeta: &helmv2.HelmChartTemplateObjectMeta{Labels: map[string]string{"team": "a"}},
		Spec: helmv2.HelmChartTemplateSpec{OCIRepositorySpec: sourcev1.OCIRepositorySpec{
			URL:       "oci://registry.example.com/charts/podinfo",
			Reference: &sourcev1.OCIRepositoryRef{Tag: "6.7.1"},
		}},
	}
	key := client.ObjectKey{Namespace: "oci", Name: "oci-web"}
	reconcileAndExpect := func(t *testing.T, wantStatus string, wantEvents ...string) {
		t.Helper()
		if err := r.reconcileChartTemplate(ctx, hr); err != nil {
			t.Fatal(err)
		}
		if hr.Status.HelmChart != wantStatus {
			t.Errorf("status.helmChart %q, want %q", hr.Status.HelmChart, wantStatus)
		}
		expectEvents(t, recorder, wantEvents...)
	}

	t.Run("create", func(t *testing.T) {
		reconcileAndExpect(t, "OCIRepository/oci/oci-web", "Trace OCIRepositoryCreated Created OCIRepository/oci/oci-web")
		var repo sourcev1.OCIRepository
		if err := c.Get(ctx, key, &repo); err != nil {
			t.Fatal(err)
		}
		if repo.Spec.URL != "oci://registry.example.com/charts/podinfo" || repo.Spec.Reference == nil || repo.Spec.Reference.Tag != "6.7.1" {
			t.Errorf("url %q ref %+v, want the template's", repo.Spec.URL, repo.Spec.Reference)
		}
		if repo.Spec.Interval == nil || repo.Spec.Interval.Duration != 10*time.Minute {
			t.Errorf("interval %v, want spec.interval 10m", repo.Spec.Interval)
		}
		want := sourcev1.OCILayerSelector{MediaType: "application/vnd.cncf.helm.chart.content.v1.tar+gzip", Operation: sourcev1.OCILayerCopy}
		if repo.Spec.LayerSelector == nil || *repo.Spec.LayerSelector != want {
			t.Errorf("layerSelector %+v, want %+v", repo.Spec.LayerSelector, want)
		}
		for k, v := range map[string]string{"team": "a", "helm.toolkit.fluxcd.io/name": "web", "helm.toolkit.fluxcd.io/namespace": "oci"} {
			if repo.Labels[k] != v {
				t.Errorf("label %s=%q, want %q (labels %v)", k, repo.Labels[k], v, repo.Labels)
			}
		}
		if !appliedBy(repo.ManagedFields, ControllerName) {
			t.Errorf("OCIRepository not server-side applied by %s: %+v", ControllerName, repo.ManagedFields)
		}
	})

	t.Run("template interval and layer selector", func(t *testing.T) {
		hr.Spec.Chart.Spec.Interval = &metav1.Duration{Duration: time.Hour}
		hr.Spec.Chart.Spec.LayerSelector = &sourcev1.OCILayerSelector{MediaType: "application/vnd.example.chart", Operation: sourcev1.OCILayerExtract}
		reconcileAndExpect(t, "OCIRepository/oci/oci-web", "Trace OCIRepositoryConfigured Configured OCIRepository/oci/oci-web")
		var repo sourcev1.OCIRepository
		if err := c.Get(ctx, key, &repo); err != nil {
			t.Fatal(err)
		}
		if repo.Spec.Interval == nil || repo.Spec.Interval.Duration != time.Hour {
			t.Errorf("interval %v, want the template's 1h", repo.Spec.Interval)
		}
		if repo.Spec.LayerSelector == nil || repo.Spec.LayerSelector.MediaType != "application/vnd.example.chart" {
			t.Errorf("layerSelector %+v, want the template's", repo.Spec.LayerSelector)
		}
	})

	t.Run("unchanged", func(t *testing.T) {
		reconcileAndExpect(t, "OCIRepository/oci/oci-web")
	})

	t.Run("kind HelmChart", func(t *testing.T) {
		hr.Spec.Chart.Kind = ""
		hr.Spec.Chart.Spec = helmv2.HelmChartTemplateSpec{Chart: "podinfo",
			SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}
		reconcileAndExpect(t, "oci/oci-web",
			"Trace OCIRepositoryDeleted deleted OCIRepository 'oci/oci-web'",
			"Trace HelmChartCreated Created HelmChart/oci/oci-web with SourceRef 'HelmRepository/oci/charts'")
		if err := c.Get(ctx, key, &sourcev1.OCIRepository{}); !apierrors.IsNotFound(err) {
			t.Errorf("the OCIRepository is still there (%v)", err)
		}
		var chart sourcev1.HelmChart
		if err := c.Get(ctx, key, &chart); err != nil {
			t.Fatal(err)
		}
		// Upstream v1.7's CRD no longer defaults these; the controller does.
		if chart.Spec.Version != "*" || chart.Spec.ReconcileStrategy != sourcev1.ReconcileStrategyChartVersion {
			t.Errorf("version %q reconcileStrategy %q, want * and ChartVersion", chart.Spec.Version, chart.Spec.ReconcileStrategy)
		}
	})

	t.Run("back to OCIRepository", func(t *testing.T) {
		hr.Spec.Chart.Kind = sourcev1.OCIRepositoryKind
		hr.Spec.Chart.Spec = helmv2.HelmChartTemplateSpec{OCIRepositorySpec: sourcev1.OCIRepositorySpec{URL: "oci://registry.example.com/charts/podinfo"}}
		reconcileAndExpect(t, "OCIRepository/oci/oci-web",
			"Trace HelmChartDeleted deleted HelmChart 'oci/oci-web'",
			"Trace OCIRepositoryCreated Created OCIRepository/oci/oci-web")
		if err := c.Get(ctx, key, &sourcev1.HelmChart{}); !apierrors.IsNotFound(err) {
			t.Errorf("the HelmChart is still there (%v)", err)
		}
	})

	t.Run("chartRef", func(t *testing.T) {
		if err := r.deleteChartTemplate(ctx, hr); err != nil {
			t.Fatal(err)
		}
		expectEvents(t, recorder, "Trace OCIRepositoryDeleted deleted OCIRepository 'oci/oci-web'")
		if hr.Status.HelmChart != "" {
			t.Errorf("status.helmChart %q, want it cleared", hr.Status.HelmChart)
		}
		if err := c.Get(ctx, key, &sourcev1.OCIRepository{}); !apierrors.IsNotFound(err) {
			t.Errorf("the OCIRepository is still there (%v)", err)
		}
		for _, action := range recorder.ActionsOf("OCIRepositoryDeleted") {
			if action != helmv2.ActionResolveSource.String() {
				t.Errorf("template event action %q, want %s", action, helmv2.ActionResolveSource)
			}
		}
	})
}

// expectEvents drains the recorded events and compares them with want.
func expectEvents(t *testing.T, recorder *eventlog.Log, want ...string) {
	t.Helper()
	var got []string
	for len(recorder.Events) > 0 {
		got = append(got, <-recorder.Events)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// appliedBy tells whether manager owns fields through server-side apply.
func appliedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func TestSetChartStatus(t *testing.T) {
	cases := []struct {
		ref  *helmv2.HelmChartReference
		want string
	}{
		{ref: &helmv2.HelmChartReference{Kind: sourcev1.HelmChartKind, Namespace: "flux-system", Name: "apps-web"}, want: "flux-system/apps-web"},
		{ref: &helmv2.HelmChartReference{Kind: sourcev1.OCIRepositoryKind, Namespace: "apps", Name: "apps-web"}, want: "OCIRepository/apps/apps-web"},
		{ref: nil, want: ""},
	}
	for _, tc := range cases {
		obj := &v2.HelmRelease{}
		obj.Status.HelmChart = "stale/value"
		setChartStatus(obj, tc.ref)
		if obj.Status.HelmChart != tc.want {
			t.Errorf("setChartStatus(%v) = %q, want %q", tc.ref, obj.Status.HelmChart, tc.want)
		}
		// Upstream reads back what we write.
		if got := obj.Status.GetHelmChartReference(); tc.ref != nil && !got.Matches(tc.ref) {
			t.Errorf("upstream reads %q as %v, want %v", obj.Status.HelmChart, got, tc.ref)
		}
	}
}

// TestChartFromTemplateSourceRef: the HelmChart's sourceRef names the
// source by kind and name only, as upstream writes it: a template's
// apiVersion (which many manifests carry) is not copied, so the two
// controllers apply the same fields and hand the HelmChart over without a
// change.
func TestChartFromTemplateSourceRef(t *testing.T) {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
	obj.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo",
		SourceRef: &helmv2.CrossNamespaceObjectReference{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	got := chartFromTemplate(obj, &helmv2.HelmChartReference{Namespace: "apps", Name: "apps-web"}).Spec.SourceRef
	if want := (sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}); got != want {
		t.Errorf("sourceRef %+v, want %+v", got, want)
	}
}
