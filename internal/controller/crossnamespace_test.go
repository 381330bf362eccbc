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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// TestNoCrossNamespaceRefs: with --no-cross-namespace-refs a HelmRelease
// may not reach a chart source in another namespace, by chart template or
// by chartRef. It is refused with Ready=False ArtifactFailed, a message
// naming the reference and the flag, and a Warning event, and nothing is
// created in the other namespace. The same references are followed
// without the flag, and a reference naming the HelmRelease's own
// namespace is followed with it.
func TestNoCrossNamespaceRefs(t *testing.T) {
	template := func(ns string) func(*v2.HelmRelease) {
		return func(hr *v2.HelmRelease) {
			hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart: "podinfo", Version: "6.x",
				SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts", Namespace: ns},
			}}
		}
	}
	chartRef := func(kind, ns string) func(*v2.HelmRelease) {
		return func(hr *v2.HelmRelease) {
			hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: kind, Name: "podinfo", Namespace: ns}
		}
	}
	tests := []struct {
		name    string
		refuse  bool // --no-cross-namespace-refs
		spec    func(*v2.HelmRelease)
		wantMsg string // in Ready's message and the event; empty: not refused
	}{
		{name: "chart template, other namespace", refuse: true, spec: template("infra"),
			wantMsg: "cannot access HelmRepository/infra/charts: cross-namespace references are disabled (--no-cross-namespace-refs)"},
		{name: "chartRef OCIRepository, other namespace", refuse: true, spec: chartRef(sourcev1.OCIRepositoryKind, "infra"),
			wantMsg: "cannot access OCIRepository 'infra/podinfo': cross-namespace references are disabled (--no-cross-namespace-refs)"},
		{name: "chartRef HelmChart, other namespace", refuse: true, spec: chartRef(sourcev1.HelmChartKind, "infra"),
			wantMsg: "cannot access HelmChart 'infra/podinfo': cross-namespace references are disabled (--no-cross-namespace-refs)"},
		{name: "chart template, own namespace named", refuse: true, spec: template("apps")},
		{name: "chartRef, own namespace named", refuse: true, spec: chartRef(sourcev1.OCIRepositoryKind, "apps")},
		{name: "chart template, other namespace, allowed", spec: template("infra")},
		{name: "chartRef, other namespace, allowed", spec: chartRef(sourcev1.OCIRepositoryKind, "infra")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1,
				Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
			hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
			tc.spec(hr)
			c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
				WithStatusSubresource(&v2.HelmRelease{}).Build()
			events := eventlog.New(20)
			r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: events,
				FieldManager: ControllerName, NoCrossNamespaceRef: tc.refuse, RequeueDependency: time.Second}

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hr)})

			got := &v2.HelmRelease{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
				t.Fatal(err)
			}
			ready := conditions.Get(got, meta.ReadyCondition)
			if tc.wantMsg == "" {
				if ready != nil && strings.Contains(ready.Message, "cross-namespace") {
					t.Errorf("refused: %s", ready.Message)
				}
				return
			}
			// As upstream: looked at again at the interval, not retried
			// with backoff; the source watch brings it back sooner.
			if err != nil || res.RequeueAfter != time.Minute {
				t.Errorf("Reconcile = %+v, %v; want a requeue at the interval", res, err)
			}
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != helmv2.ArtifactFailedReason ||
				!strings.Contains(ready.Message, tc.wantMsg) {
				t.Errorf("Ready %+v, want False/ArtifactFailed with %q", ready, tc.wantMsg)
			}
			if !hasEvent(events, tc.wantMsg) {
				t.Errorf("no event with %q", tc.wantMsg)
			}
			var charts sourcev1.HelmChartList
			if err := c.List(context.Background(), &charts, client.InNamespace("infra")); err != nil {
				t.Fatal(err)
			}
			if len(charts.Items) != 0 {
				t.Errorf("a HelmChart was created in the other namespace: %s", charts.Items[0].Name)
			}
		})
	}
}

func hasEvent(events *eventlog.Log, contains string) bool {
	for {
		select {
		case e := <-events.Events:
			if strings.Contains(e, contains) {
				return true
			}
		default:
			return false
		}
	}
}
