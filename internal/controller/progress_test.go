package controller

import (
	"context"
	"sync"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Helm can return (its context cancelled) while one of its goroutines
// still reports hook progress. Once the action has returned and its
// callbacks are closed, those reports must not touch the HelmRelease the
// reconcile goes on editing; run with -race.
func TestHelmCallbacksStopWhenClosed(t *testing.T) {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
	c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(obj).
		WithStatusSubresource(&v2.HelmRelease{}).Build()
	p := &progressReporter{ctx: context.Background(), obj: obj, patcher: patch.NewSerialPatcher(obj, c), owner: ControllerName}
	callbacks := p.helmCallbacks()

	started := make(chan struct{})
	var helm sync.WaitGroup
	helm.Add(1)
	go func() { // Helm's goroutine, still running after the action returned
		defer helm.Done()
		close(started)
		for i := 0; i < 200; i++ {
			callbacks.report("running post-install hook web-migrate")
		}
	}()
	<-started
	callbacks.close() // the action returned
	// The reconcile owns the object again.
	for i := 0; i < 200; i++ {
		conditions.MarkFalse(obj, meta.ReadyCondition, "InstallFailed", "attempt %d", i)
	}
	helm.Wait()
	if got := conditions.GetMessage(obj, meta.ReadyCondition); got != "attempt 199" {
		t.Errorf("Ready message %q, want the reconcile's last write", got)
	}
	if msg := conditions.GetMessage(obj, meta.ReconcilingCondition); msg != "" && msg != "running post-install hook web-migrate" {
		t.Errorf("Reconciling message %q", msg)
	}
}
