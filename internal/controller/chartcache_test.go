package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// chartCacheLag is the controller's cache before it has seen any
// HelmChart: writes reach the API server, reads of HelmCharts find
// nothing.
type chartCacheLag struct{ client.Client }

func (c chartCacheLag) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*sourcev1.HelmChart); ok {
		return apierrors.NewNotFound(sourcev1.GroupVersion.WithResource("helmcharts").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// The first reconcile of a new HelmRelease with a chart template creates
// the HelmChart and reads it back at once, usually before the watch
// brought it into the cache. That HelmChart exists and has no artifact
// yet: the release waits for its source (Ready=False SourceNotReady, no
// event), as it does once the cache has it. Under load (test/reliability
// TestLoad, 50 releases at once) more than half of the releases got a
// Warning ArtifactFailed event "could not get source HelmChart …: not
// found" instead, which notification-controller forwards as an alert.
// A chartRef to a HelmChart that does not exist still fails.
func TestNewChartTemplateNotYetInTheCacheWaitsForItsSource(t *testing.T) {
	tests := []struct {
		name       string
		spec       func(*v2.HelmRelease)
		wantReason string
		wantEvent  string // a Warning event containing it; empty: no Warning event
	}{
		{
			name: "chart template, HelmChart just created",
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo", Version: "6.x",
					SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
			},
			wantReason: SourceNotReadyReason,
		},
		{
			name: "chartRef to a HelmChart that does not exist",
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.HelmChartKind, Name: "missing"}
			},
			wantReason: helmv2.ArtifactFailedReason,
			wantEvent:  "could not get source HelmChart 'apps/missing': not found",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1,
				Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
			hr.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
			tc.spec(hr)
			api := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
				WithStatusSubresource(&v2.HelmRelease{}, &sourcev1.HelmChart{}).Build()
			events := eventlog.New(20)
			r := &HelmReleaseReconciler{Client: chartCacheLag{api}, APIReader: api, EventRecorder: events,
				FieldManager: ControllerName, RequeueDependency: 5 * time.Second}

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hr)})
			if err != nil || res.RequeueAfter == 0 {
				t.Errorf("Reconcile = %+v, %v; want a requeue without error", res, err)
			}
			got := &v2.HelmRelease{}
			if err := api.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
				t.Fatal(err)
			}
			if c := conditions.Get(got, meta.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.wantReason {
				t.Errorf("Ready %+v, want False/%s", c, tc.wantReason)
			}
			var warnings []string
			for len(events.Events) > 0 {
				if e := <-events.Events; strings.HasPrefix(e, corev1.EventTypeWarning) {
					warnings = append(warnings, e)
				}
			}
			switch {
			case tc.wantEvent == "" && len(warnings) > 0:
				t.Errorf("Warning events %q, want none", warnings)
			case tc.wantEvent != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], tc.wantEvent)):
				t.Errorf("Warning events %q, want one containing %q", warnings, tc.wantEvent)
			}
		})
	}
}

// sourceUnavailable is an API server that answers reads of HelmCharts with
// 503, as while it restarts.
type sourceUnavailable struct{ client.Client }

func (c sourceUnavailable) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*sourcev1.HelmChart); ok {
		return apierrors.NewServiceUnavailable("the server is restarting")
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// A source that cannot be read for a moment (the API server restarting,
// overloaded) is not bad input: as upstream, the reconcile is retried with
// backoff, not after the whole interval (no watch would bring it back
// sooner: the source did not change), and no Warning event goes out. Ready
// says why it waits.
func TestTransientSourceReadFailureRetriesWithBackoff(t *testing.T) {
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1,
		Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
	hr.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
	hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.HelmChartKind, Name: "web"}
	api := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
		WithStatusSubresource(&v2.HelmRelease{}, &sourcev1.HelmChart{}).Build()
	events := eventlog.New(20)
	r := &HelmReleaseReconciler{Client: sourceUnavailable{api}, APIReader: sourceUnavailable{api}, EventRecorder: events,
		FieldManager: ControllerName, RequeueDependency: 5 * time.Second}

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hr)})
	if err == nil || !apierrors.IsServiceUnavailable(err) || res.RequeueAfter != 0 {
		t.Errorf("Reconcile = %+v, %v; want the API error returned for a retry with backoff", res, err)
	}
	got := &v2.HelmRelease{}
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
		t.Fatal(err)
	}
	if c := conditions.Get(got, meta.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.ArtifactFailedReason ||
		!strings.Contains(c.Message, "the server is restarting") {
		t.Errorf("Ready %+v, want False/ArtifactFailed naming the API error", c)
	}
	for len(events.Events) > 0 {
		if e := <-events.Events; strings.HasPrefix(e, corev1.EventTypeWarning) {
			t.Errorf("Warning event %q, want none for a transient failure", e)
		}
	}
}
