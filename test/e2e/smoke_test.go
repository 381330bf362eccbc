package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestSmoke walks a HelmRelease through the lifecycle the controller
// skeleton owns: a real source-controller artifact, the finalizer,
// observedGeneration, suspension and deletion.
func TestSmoke(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)

	chart := createPodinfoHelmChart(t, ns)
	env.Eventually(t, 2*time.Minute, "HelmChart has a Ready artifact", func(ctx context.Context) error {
		if err := env.Get(ctx, chart, ns, chart.Name); err != nil {
			return err
		}
		if err := framework.Ready(chart); err != nil {
			return err
		}
		if chart.Status.Artifact == nil {
			return fmt.Errorf("no artifact in status")
		}
		return nil
	})
	if got, want := chart.Status.Artifact.Revision, env.Podinfo.Version; got != want {
		t.Fatalf("artifact revision = %q, want chart version %q", got, want)
	}

	hr := &v2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "podinfo", Namespace: ns},
		Spec: v2.HelmReleaseSpec{
			HelmReleaseSpec: helmv2.HelmReleaseSpec{
				Interval: metav1.Duration{Duration: time.Minute},
				ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.HelmChartKind, Name: chart.Name},
			},
			Install: &v2.Install{WaitStrategy: v2.AfterHooks},
		},
	}
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}

	t.Run("finalizer and observedGeneration", func(t *testing.T) {
		env.Eventually(t, time.Minute, "HelmRelease handled", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if !controllerutil.ContainsFinalizer(hr, helmv2.HelmReleaseFinalizer) {
				return fmt.Errorf("finalizer %s not set: %v", helmv2.HelmReleaseFinalizer, hr.Finalizers)
			}
			if hr.Status.ObservedGeneration != hr.Generation {
				return fmt.Errorf("observedGeneration %d, generation %d", hr.Status.ObservedGeneration, hr.Generation)
			}
			return nil
		})
		ready := conditions.Get(hr, meta.ReadyCondition)
		if ready == nil || !strings.Contains(ready.Message, chart.Status.Artifact.Revision) {
			t.Fatalf("Ready condition does not report the source artifact %s: %+v", chart.Status.Artifact.Revision, ready)
		}
	})

	t.Run("suspend is honoured", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Suspend = true })
		suspendedGeneration := hr.Generation
		readyBefore := conditions.Get(hr, meta.ReadyCondition).DeepCopy()
		// While suspended, point the release at a source that does not exist:
		// a controller that acted on the object would report ArtifactFailed.
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.ChartRef.Name = "missing-chart" })
		env.Consistently(t, 5*time.Second, "suspended HelmRelease is left alone", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			ready := conditions.Get(hr, meta.ReadyCondition)
			if ready == nil || ready.Reason != readyBefore.Reason || ready.Message != readyBefore.Message ||
				ready.ObservedGeneration != readyBefore.ObservedGeneration {
				return fmt.Errorf("Ready condition changed while suspended: %+v, was %+v", ready, readyBefore)
			}
			return nil
		})
		// As upstream, a suspended generation counts as observed (left
		// alone, as asked), so health checks and dependsOn on it pass;
		// Ready keeps the generation it was set for.
		if hr.Status.ObservedGeneration != hr.Generation || hr.Generation <= suspendedGeneration {
			t.Errorf("observedGeneration %d, generation %d (suspended at %d): want the suspended generation observed",
				hr.Status.ObservedGeneration, hr.Generation, suspendedGeneration)
		}

		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Suspend = false })
		env.Eventually(t, time.Minute, "resumed HelmRelease reconciled", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			// A missing source is waited for: as upstream, the generation
			// is not observed, but Ready speaks for it.
			ready := conditions.Get(hr, meta.ReadyCondition)
			if ready == nil || ready.ObservedGeneration != hr.Generation || ready.Reason != helmv2.ArtifactFailedReason ||
				!strings.Contains(ready.Message, "missing-chart") {
				return fmt.Errorf("Ready condition %+v does not report the missing source of generation %d after resuming", ready, hr.Generation)
			}
			if hr.Status.ObservedGeneration == hr.Generation {
				return fmt.Errorf("generation %d observed while its source is missing", hr.Generation)
			}
			return nil
		})
	})

	t.Run("missing source", func(t *testing.T) {
		broken := &v2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: "no-source", Namespace: ns},
			Spec: v2.HelmReleaseSpec{HelmReleaseSpec: helmv2.HelmReleaseSpec{
				Interval: metav1.Duration{Duration: time.Minute},
				ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "does-not-exist"},
			}},
		}
		if err := env.Client.Create(ctx, broken); err != nil {
			t.Fatalf("creating HelmRelease: %v", err)
		}
		env.Eventually(t, time.Minute, "missing source reported", func(ctx context.Context) error {
			if err := env.Get(ctx, broken, ns, broken.Name); err != nil {
				return err
			}
			c := conditions.Get(broken, meta.ReadyCondition)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.ArtifactFailedReason {
				return fmt.Errorf("Ready condition %+v, want False/%s", c, helmv2.ArtifactFailedReason)
			}
			if !strings.Contains(c.Message, "does-not-exist") {
				return fmt.Errorf("message %q does not name the missing source", c.Message)
			}
			return nil
		})
	})

	t.Run("deletion completes", func(t *testing.T) {
		if err := env.Client.Delete(ctx, hr); err != nil {
			t.Fatalf("deleting HelmRelease: %v", err)
		}
		env.Eventually(t, time.Minute, "HelmRelease deleted", func(ctx context.Context) error { return env.Gone(ctx, hr) })
	})
}

// TestSimulatedSecretDependency shows the workload simulator holding a
// Deployment unready until the Secret its pods mount exists.
func TestSimulatedSecretDependency(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	labels := map[string]string{"app": "needs-secret"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "needs-secret", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "app", Image: "example.com/app:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}},
					}},
					Volumes: []corev1.Volume{{
						Name:         "creds",
						VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}},
					}},
				},
			},
		},
	}
	if err := env.Client.Create(ctx, deploy); err != nil {
		t.Fatalf("creating Deployment: %v", err)
	}

	env.Consistently(t, 8*time.Second, "Deployment stays unavailable without its Secret", func(ctx context.Context) error {
		if err := env.Get(ctx, deploy, ns, deploy.Name); err != nil {
			return err
		}
		if deploy.Status.AvailableReplicas > 0 {
			return fmt.Errorf("%d replicas available although Secret creds is missing", deploy.Status.AvailableReplicas)
		}
		return nil
	})

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		StringData: map[string]string{"password": "s3cret"},
	}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatalf("creating Secret: %v", err)
	}
	env.Eventually(t, time.Minute, "Deployment available once the Secret exists", func(ctx context.Context) error {
		if err := env.Get(ctx, deploy, ns, deploy.Name); err != nil {
			return err
		}
		if deploy.Status.AvailableReplicas != 1 {
			return fmt.Errorf("available replicas %d", deploy.Status.AvailableReplicas)
		}
		return nil
	})
}

// createPodinfoHelmChart creates a HelmChart of the shared podinfo from a
// HelmRepository of the chart server, without a HelmRelease.
func createPodinfoHelmChart(t *testing.T, ns string) *sourcev1.HelmChart {
	t.Helper()
	ctx := context.Background()
	repo := env.HelmRepository(t, ns)
	chart := &sourcev1.HelmChart{
		ObjectMeta: metav1.ObjectMeta{Name: "podinfo", Namespace: ns},
		Spec: sourcev1.HelmChartSpec{
			Chart:     env.Podinfo.Name,
			Version:   env.Podinfo.Version,
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: repo.Name},
			Interval:  metav1.Duration{Duration: time.Minute},
		},
	}
	if err := env.Client.Create(ctx, chart); err != nil {
		t.Fatalf("creating HelmChart: %v", err)
	}
	return chart
}
