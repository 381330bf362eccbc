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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestDrift changes spec.replicas of podinfo's Deployment behind the
// controller's back, as `kubectl scale` would, and checks what each drift
// detection setting makes of it on the next reconcile.
func TestDrift(t *testing.T) {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)

	t.Run("enabled mode corrects the drift and restores a deleted object", func(t *testing.T) {
		t.Parallel()
		hr := driftRelease(t, ns, "podinfo-enabled", repo, &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled})
		driftWantCondition(t, hr, metav1.ConditionFalse, helmv2.NoDriftDetectedReason)

		driftScale(t, ns, hr.Name, 3)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hr.Name}}
		if err := env.Client.Delete(context.Background(), svc); err != nil {
			t.Fatalf("deleting the Service: %v", err)
		}
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
		driftWantReplicas(t, ns, hr.Name, 1)
		if err := env.Get(context.Background(), svc, ns, hr.Name); err != nil {
			t.Errorf("deleted Service not restored: %v", err)
		}
		driftWantCondition(t, hr, metav1.ConditionFalse, helmv2.NoDriftDetectedReason)
		if err := framework.Ready(hr); err != nil {
			t.Errorf("after the correction: %v", err)
		}
		deployment := fmt.Sprintf("Deployment/%s/%s", ns, hr.Name)
		service := fmt.Sprintf("Service/%s/%s", ns, hr.Name)
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: helmv2.DriftDetectedReason,
			Contains: deployment + " changed",
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: helmv2.DriftDetectedReason,
			Contains: service + " deleted",
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: "DriftCorrected",
			Contains: deployment + " configured",
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: "DriftCorrected",
			Contains: service + " created",
		})
		env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{Reason: helmv2.DriftDetectedReason, Revision: true})
		if got := len(env.Storage(t, ns, hr.Name)); got != 1 {
			t.Errorf("%d Helm revisions after the correction, want 1: drift is corrected without an upgrade", got)
		}
	})

	t.Run("a matching ignore rule leaves the field alone", func(t *testing.T) {
		t.Parallel()
		hr := driftRelease(t, ns, "podinfo-ignore", repo, &helmv2.DriftDetection{
			Mode:   helmv2.DriftDetectionEnabled,
			Ignore: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{Kind: "Deployment"}}},
		})
		driftScale(t, ns, hr.Name, 3)
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
		driftWantCondition(t, hr, metav1.ConditionFalse, helmv2.NoDriftDetectedReason)
		driftWantReplicas(t, ns, hr.Name, 3)
		env.WantNoEvent(t, ns, hr.Name, framework.EventWant{Reason: helmv2.DriftDetectedReason})
	})

	t.Run("the driftDetection annotation excludes the object", func(t *testing.T) {
		t.Parallel()
		hr := driftRelease(t, ns, "podinfo-annotated", repo, &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled})
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"replicas":3}}`,
			helmv2.DriftDetectionMetadataKey, helmv2.DriftDetectionDisabledValue)
		driftPatchDeployment(t, ns, hr.Name, patch)
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
		driftWantCondition(t, hr, metav1.ConditionFalse, helmv2.NoDriftDetectedReason)
		driftWantReplicas(t, ns, hr.Name, 3)
		env.WantNoEvent(t, ns, hr.Name, framework.EventWant{Reason: helmv2.DriftDetectedReason})
	})

	t.Run("warn mode only reports", func(t *testing.T) {
		t.Parallel()
		hr := driftRelease(t, ns, "podinfo-warn", repo, &helmv2.DriftDetection{Mode: helmv2.DriftDetectionWarn})
		driftScale(t, ns, hr.Name, 3)
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
		c := driftWantCondition(t, hr, metav1.ConditionTrue, helmv2.DriftDetectedReason)
		deployment := fmt.Sprintf("Deployment/%s/%s changed", ns, hr.Name)
		if !strings.Contains(c.Message, deployment) {
			t.Errorf("Drifted message %q does not name %q", c.Message, deployment)
		}
		if err := framework.Ready(hr); err != nil {
			t.Errorf("warn mode changed Ready: %v", err)
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: helmv2.DriftDetectedReason,
			Contains: deployment,
		})
		driftWantReplicas(t, ns, hr.Name, 3)
		env.WantNoEvent(t, ns, hr.Name, framework.EventWant{Reason: "DriftCorrected"})
	})

	// Upstream installs a release whose ignore path is not a JSON pointer
	// and reads the path as its diff library does: a dotted path ignores
	// nothing. So does this controller, with a Warning event naming the
	// rule; it used to stall the release before installing anything.
	t.Run("an ignore path that is not a JSON pointer installs and is used as upstream uses it", func(t *testing.T) {
		t.Parallel()
		hr := driftRelease(t, ns, "podinfo-dotted", repo, &helmv2.DriftDetection{
			Mode:   helmv2.DriftDetectionEnabled,
			Ignore: []helmv2.IgnoreRule{{Paths: []string{"spec.replicas"}}},
		})
		if err := framework.Ready(hr); err != nil {
			t.Fatal(err)
		}
		if conditions.IsStalled(hr) {
			t.Errorf("Stalled: %s", conditions.GetMessage(hr, meta.StalledCondition))
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: "InvalidDriftDetection",
			Contains: `spec.driftDetection.ignore[0]: path "spec.replicas" is not a JSON pointer (e.g. "/spec/replicas") and ignores nothing`,
		})
		if got := len(env.Storage(t, ns, hr.Name)); got != 1 {
			t.Errorf("%d Helm revisions, want 1", got)
		}

		// The path ignores nothing: scaled replicas are drift, corrected.
		driftScale(t, ns, hr.Name, 3)
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: "DriftCorrected",
			Contains: fmt.Sprintf("Deployment/%s/%s configured", ns, hr.Name),
		})
		driftWantReplicas(t, ns, hr.Name, 1)
	})
}

// driftRelease installs podinfo with one replica and the given drift
// detection and waits until it is Ready.
func driftRelease(t *testing.T, ns, name string, repo *sourcev1.HelmRepository, dd *helmv2.DriftDetection) *v2.HelmRelease {
	t.Helper()
	hr := env.PodinfoRelease(ns, name, repo.Name, "")
	hr.Spec.Values = framework.JSON(`{"replicaCount": 1}`)
	hr.Spec.DriftDetection = dd
	if err := env.Client.Create(context.Background(), hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	return hr
}

// driftScale sets the Deployment's replicas like `kubectl scale` does: an
// update by another field manager.
func driftScale(t *testing.T, ns, name string, replicas int) {
	t.Helper()
	driftPatchDeployment(t, ns, name, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
}

func driftPatchDeployment(t *testing.T, ns, name, patch string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, []byte(patch)),
		client.FieldOwner("e2e-kubectl")); err != nil {
		t.Fatalf("patching Deployment %s: %v", name, err)
	}
}

func driftWantReplicas(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Get(context.Background(), d, ns, name); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Fatalf("Deployment %s has spec.replicas %v, want %d", name, d.Spec.Replicas, replicas)
	}
}

// driftWantCondition checks the Drifted condition of hr as last read.
func driftWantCondition(t *testing.T, hr *v2.HelmRelease, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	c := conditions.Get(hr, helmv2.DriftedCondition)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Fatalf("Drifted condition %+v, want %s/%s", c, status, reason)
	}
	return c
}
