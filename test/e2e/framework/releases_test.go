package framework

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestDeploymentReadyTellsNotReadyFromUnreadable(t *testing.T) {
	notReady := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", Generation: 1}}
	ready := notReady.DeepCopy()
	ready.Name = "ok"
	ready.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, ReadyReplicas: 1, UpdatedReplicas: 1}
	throttled := errors.New("client rate limiter Wait returned an error: context deadline exceeded")

	e := &Env{Client: fake.NewClientBuilder().WithObjects(notReady, ready).Build()}
	if err := e.DeploymentReady(context.Background(), "ns", "app"); !errors.Is(err, ErrNotReady) {
		t.Errorf("not ready Deployment: %v, want ErrNotReady", err)
	}
	if err := e.DeploymentReady(context.Background(), "ns", "ok"); err != nil {
		t.Errorf("ready Deployment: %v", err)
	}
	e.Client = fake.NewClientBuilder().WithObjects(notReady).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return throttled
		},
	}).Build()
	if err := e.DeploymentReady(context.Background(), "ns", "app"); err == nil || errors.Is(err, ErrNotReady) {
		t.Errorf("unreadable Deployment: %v, want the read error, not ErrNotReady", err)
	}
}
