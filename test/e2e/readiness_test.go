package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestReadyNeverLies drives every way a reconcile can fail, from bad input
// to workloads that never become ready, and checks the promise Flux users
// and tools (dependsOn, alerts, kstatus) rely on: Ready is False with a
// reason and a message naming the cause, a Warning event says so where
// the HelmRelease's own input is at fault, and Ready never turns True
// afterwards while the cause stays.
func TestReadyNeverLies(t *testing.T) {
	t.Parallel()
	crashloop := `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`
	yes, no := true, false
	cases := []struct {
		name string
		// release builds the failing HelmRelease in ns, from the
		// HelmRepository repo.
		release func(t *testing.T, ns, repo string) *v2.HelmRelease
		reason  string
		// inMessage must appear in Ready's message (and the event's).
		inMessage string
		// event: a Warning event with the reason is expected.
		event bool
		// stalled: the failure cannot go away without a spec change.
		stalled bool
		// observed: whether the generation counts as reconciled, as
		// upstream decides it (not while waiting for something outside the
		// HelmRelease, nor after an error that is retried with backoff);
		// unchecked when unset.
		observed *bool
	}{
		{name: "missing-service-account", reason: "StateError", inMessage: "system:serviceaccount:%s:ghost", event: true, observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.ServiceAccountName = "ghost"
				return hr
			}},
		{name: "missing-kubeconfig-secret", reason: "RESTClientError", inMessage: "not-there", event: true, observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				return framework.Targeting(env.PodinfoRelease(ns, "podinfo", repo, ""), "not-there")
			}},
		{name: "missing-chart-version", reason: "SourceNotReady", inMessage: "99.0.0", event: true, observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.Chart.Spec.Version = "99.0.0"
				return hr
			}},
		{name: "missing-helm-repository", reason: "SourceNotReady", inMessage: "ghost-repo", event: true, observed: &no,
			release: func(_ *testing.T, ns, _ string) *v2.HelmRelease {
				return env.PodinfoRelease(ns, "podinfo", "ghost-repo", "")
			}},
		{name: "missing-chart-ref-source", reason: helmv2.ArtifactFailedReason, inMessage: "ghost-oci", event: true, observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.Chart = nil
				hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "ghost-oci"}
				return hr
			}},
		{name: "oci-tag-is-another-version", reason: "ChartMutateError", inMessage: "artifact revision 9.9.9-%s does not match chart version 0.1.0-%s", event: true, observed: &no,
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				chart := env.PublishChart(t, "e2e-broken", "0.1.0", ns, chartserver.WithOCITag("9.9.9-"+ns))
				oci := env.OCIRepository(t, ns, "mistagged", chart.Name, "9.9.9-"+ns)
				hr := framework.Release(ns, "app", repo, chart.Name, chart.Version, "")
				hr.Spec.Chart = nil
				hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: oci.Name}
				return hr
			}},
		{name: "missing-values-secret", reason: "ValuesError", inMessage: "missing-values", event: true, observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "Secret", Name: "missing-values"}}
				return hr
			}},
		{name: "invalid-health-check-expression", reason: meta.InvalidCELExpressionReason, inMessage: "status.phase ==", event: true, stalled: true, observed: &yes,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "apps/v1", Kind: "Deployment",
					HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.phase =="}}}
				return hr
			}},
		{name: "invalid-post-renderer", reason: "InvalidPostRenderers", inMessage: "labelSelector", event: true, stalled: true, observed: &yes,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{{
					Patch:  `[{"op": "add", "path": "/metadata/labels/x", "value": "y"}]`,
					Target: &kustomize.Selector{Kind: "Deployment", LabelSelector: "app in (podinfo"},
				}}}}}
				return hr
			}},
		// As upstream, the release is installed; then every drift
		// detection fails (upstream's reason is StateError).
		{name: "invalid-drift-ignore-rule", reason: "DriftDetectionFailed", inMessage: "failed to create ignore rule selector: invalid label selector", event: true, observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled, Ignore: []helmv2.IgnoreRule{{
					Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{LabelSelector: "app in (podinfo"}}}}
				return hr
			}},
		{name: "chart-does-not-render", reason: helmv2.InstallFailedReason, inMessage: "broken on purpose", event: true,
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				broken := env.PublishChart(t, "e2e-broken", "0.2.0", ns, chartserver.WithValues(map[string]any{"broken": true}))
				return framework.Release(ns, "app", repo, broken.Name, broken.Version, "")
			}},
		// Install remediation defaults to no retries: the release stalls.
		{name: "workload-never-ready", reason: helmv2.InstallFailedReason, inMessage: "Deployment/%s/podinfo", event: true, stalled: true,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, crashloop)
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{Timeout: &metav1.Duration{Duration: 5 * time.Second}}}
				return hr
			}},
		{name: "workload-never-ready-after-hooks", reason: helmv2.InstallFailedReason, inMessage: "Deployment/%s/podinfo", event: true, stalled: true,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, crashloop)
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{Timeout: &metav1.Duration{Duration: 5 * time.Second}},
					WaitStrategy: v2.AfterHooks}
				return hr
			}},
		{name: "missing-dependency", reason: helmv2.DependencyNotReadyReason, inMessage: "ghost-dependency", observed: &no,
			release: func(_ *testing.T, ns, repo string) *v2.HelmRelease {
				hr := env.PodinfoRelease(ns, "podinfo", repo, "")
				hr.Spec.DependsOn = []v2.DependencyReference{{Name: "ghost-dependency"}}
				return hr
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			repo := env.HelmRepository(t, ns)
			hr := tc.release(t, ns, repo.Name)
			env.Create(t, hr)
			inMessage := tc.inMessage
			inMessage = strings.ReplaceAll(inMessage, "%s", ns)
			env.Eventually(t, time.Minute, fmt.Sprintf("Ready=False/%s naming %q", tc.reason, inMessage), func(ctx context.Context) error {
				if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, tc.reason); err != nil {
					return err
				}
				if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, inMessage) {
					return fmt.Errorf("Ready message %q does not name %q", msg, inMessage)
				}
				return nil
			})
			t.Logf("Ready=False/%s: %s", tc.reason, conditions.GetMessage(hr, meta.ReadyCondition))
			if tc.event {
				env.WaitEvent(t, ns, hr.Name, framework.EventWant{
					Type: corev1.EventTypeWarning, Reason: tc.reason,
					Contains: inMessage,
				})
			}
			env.Consistently(t, 4*time.Second, "Ready never True while the cause stays", func(ctx context.Context) error {
				if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				if conditions.IsTrue(hr, meta.ReadyCondition) {
					return fmt.Errorf("Ready=True/%s: %s", conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition))
				}
				if observed := hr.Status.ObservedGeneration == hr.Generation; tc.observed != nil && observed != *tc.observed {
					return fmt.Errorf("observedGeneration %d at generation %d, want observed=%t", hr.Status.ObservedGeneration, hr.Generation, *tc.observed)
				}
				return nil
			})
			if got := conditions.IsStalled(hr); got != tc.stalled {
				t.Errorf("Stalled=%t, want %t (%s)", got, tc.stalled, framework.Conditions(hr))
			}
		})
	}
}
