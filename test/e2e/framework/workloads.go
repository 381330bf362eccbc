package framework

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// deployment reads the Deployment ns/name or fails the test.
func (e *Env) deployment(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := e.Get(context.Background(), d, ns, name); err != nil {
		t.Fatalf("Deployment %s: %v", name, err)
	}
	return d
}

// WantDeploymentReplicas checks the Deployment ns/name asks for replicas
// and has them ready, as it must once its release is Ready.
func (e *Env) WantDeploymentReplicas(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	d := e.deployment(t, ns, name)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != replicas {
		t.Fatalf("Deployment %s replicas %v, want %d", name, d.Spec.Replicas, replicas)
	}
	if d.Status.ReadyReplicas != replicas {
		t.Fatalf("Deployment %s has %d ready replicas after the release was Ready, want %d", name, d.Status.ReadyReplicas, replicas)
	}
}

// WantDeploymentAvailable checks the one-replica Deployment ns/name has
// rolled out its current generation and its replica is available.
func (e *Env) WantDeploymentAvailable(t testing.TB, ns, name string) {
	t.Helper()
	d := e.deployment(t, ns, name)
	if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != 1 || d.Status.AvailableReplicas != 1 {
		t.Errorf("Deployment %s not ready: generation %d, status %+v", name, d.Generation, d.Status)
	}
}

// PodTemplateAnnotations returns the pod template annotations of the
// Deployment ns/name.
func (e *Env) PodTemplateAnnotations(t testing.TB, ns, name string) map[string]string {
	t.Helper()
	return e.deployment(t, ns, name).Spec.Template.Annotations
}
