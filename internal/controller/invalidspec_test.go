package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
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

// TestSpecUpstreamAcceptsGoesOn: settings upstream accepts, however little
// they do what they read as, do not stop the release here either. The
// reconcile goes on (to the missing source, in this test) with a Warning
// event naming the setting, sent while the generation is not reconciled
// yet, and no Stalled condition.
func TestSpecUpstreamAcceptsGoesOn(t *testing.T) {
	tests := []struct {
		name   string
		spec   func(hr *v2.HelmRelease)
		reason string
		want   string
		// noCrossNamespaceRefs is --no-cross-namespace-refs; objects are
		// there besides the HelmRelease.
		noCrossNamespaceRefs bool
		objects              []client.Object
	}{
		{name: "dependency in another namespace under --no-cross-namespace-refs", reason: invalidDependencyReason,
			want:                 "dependency 'infra/db' is in another namespace than the HelmRelease while cross-namespace references are disabled",
			noCrossNamespaceRefs: true, objects: []client.Object{readyRelease("infra", "db")},
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: "db", Namespace: "infra"}}
			}},
		{name: "drift ignore path that is not a JSON pointer", reason: InvalidDriftDetectionReason,
			want: `spec.driftDetection.ignore[0]: path "spec.replicas" is not a JSON pointer`,
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled,
					Ignore: []helmv2.IgnoreRule{{Paths: []string{"spec.replicas"}}}}
			}},
		{name: "drift ignore target that does not compile", reason: InvalidDriftDetectionReason,
			want: "spec.driftDetection.ignore[0].target: invalid label selector",
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionWarn,
					Ignore: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{LabelSelector: "app in (web"}}}}
			}},
		{name: "health check apiVersion that is not group/version", reason: InvalidHealthCheckExprsReason,
			want: `healthCheckExprs[0].apiVersion "apps" is not group/version`,
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "apps", Kind: "Deployment",
					HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "true"}}}
			}},
		{name: "post renderer operation that fails on what it selects", reason: InvalidPostRenderersReason,
			want: `spec.postRenderers[0].kustomize.patches[0]: operation 0: path "metadata" is not a JSON pointer`,
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{{
					Patch: `[{"op": "add", "path": "metadata", "value": "y"}]`, Target: &kustomize.Selector{Kind: "Deployment"}}}}}}
			}},
		{name: "post renderer image without name", reason: InvalidPostRenderersReason,
			want: "spec.postRenderers[0].kustomize.images[0].name is empty",
			spec: func(hr *v2.HelmRelease) {
				hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Images: []kustomize.Image{{NewTag: "2"}}}}}
			}},
	}
	for _, tc := range tests {
		for _, observed := range []bool{false, true} {
			name := tc.name
			if observed {
				name += ", generation already reconciled"
			}
			t.Run(name, func(t *testing.T) {
				hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 2,
					Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
				hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
				hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "ghost"}
				if observed {
					hr.Status.ObservedGeneration = 2
				}
				tc.spec(hr)
				c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).WithObjects(tc.objects...).
					WithStatusSubresource(&v2.HelmRelease{}).Build()
				events := eventlog.New(20)
				r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: events, FieldManager: ControllerName,
					RequeueDependency: time.Second, NoCrossNamespaceRef: tc.noCrossNamespaceRefs}

				if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hr)}); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				got := &v2.HelmRelease{}
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(hr), got); err != nil {
					t.Fatal(err)
				}
				if err := conditionIs(got, meta.ReadyCondition, metav1.ConditionFalse, helmv2.ArtifactFailedReason); err != "" {
					t.Errorf("%s: the reconcile did not go on to the source", err)
				}
				if conditions.Has(got, meta.StalledCondition) {
					t.Errorf("Stalled: %s", conditions.GetMessage(got, meta.StalledCondition))
				}
				warned := false
				for len(events.Events) > 0 {
					e := <-events.Events
					if strings.HasPrefix(e, "Warning "+tc.reason+" ") {
						warned = true
						if !strings.Contains(e, tc.want) {
							t.Errorf("event %q does not name %q", e, tc.want)
						}
					}
				}
				if warned == observed {
					t.Errorf("Warning %s sent: %t, want %t", tc.reason, warned, !observed)
				}
			})
		}
	}
}

// conditionIs says how condition typ of obj differs from status and
// reason; empty when it does not.
func conditionIs(obj *v2.HelmRelease, typ string, status metav1.ConditionStatus, reason string) string {
	c := conditions.Get(obj, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		return typ + " " + conditionString(c) + ", want " + string(status) + "/" + reason
	}
	return ""
}

func conditionString(c *metav1.Condition) string {
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}
