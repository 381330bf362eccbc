package controller

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// A reconcile interrupted by shutdown (its context cancelled) after Helm
// made a revision must still record that revision in the status history:
// otherwise the next run sees a release its history does not know.
func TestFinalStatusWriteSurvivesCancelledReconcile(t *testing.T) {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1}}
	// Like a real client: a request with a cancelled context fails.
	c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(obj).
		WithStatusSubresource(&v2.HelmRelease{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, o client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				return cl.SubResource(sub).Patch(ctx, o, p, opts...)
			},
		}).Build()
	r := &HelmReleaseReconciler{Client: c, FieldManager: ControllerName}
	patcher := newReleasePatcher(obj, c, ControllerName)

	ctx, cancel := context.WithCancel(context.Background())
	obj.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, Status: "deployed", ChartVersion: "1.0.0"}}
	cancel() // SIGTERM arrived while Helm finished
	if err := r.finalizeStatus(ctx, patcher, obj, false); err != nil {
		t.Fatalf("finalizeStatus: %v", err)
	}
	got := &v2.HelmRelease{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if latest := got.Status.History.Latest(); latest == nil || latest.Version != 2 {
		t.Errorf("stored history %+v, want v2 recorded", got.Status.History)
	}
}

// A HelmRelease waiting for a dependency has not been reconciled at its
// generation: as upstream, observedGeneration stays behind, so kstatus
// tools read it as in progress rather than failed.
func TestWaitingDoesNotObserveTheGeneration(t *testing.T) {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 2,
		Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
	obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
	obj.Spec.DependsOn = []v2.DependencyReference{{Name: "database"}}
	obj.Status.ObservedGeneration = 1
	c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(obj).
		WithStatusSubresource(&v2.HelmRelease{}).Build()
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: eventlog.New(10),
		FieldManager: ControllerName, RequeueDependency: 5 * time.Second}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("Reconcile = %+v, %v; want a requeue without error", res, err)
	}
	got := &v2.HelmRelease{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d while waiting for a dependency, want it left at 1", got.Status.ObservedGeneration)
	}
	if c := conditions.Get(got, meta.ReadyCondition); c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.DependencyNotReadyReason {
		t.Errorf("Ready %+v, want False/DependencyNotReady", c)
	}
}

// The reconcile that removes the finalizer of a deleted HelmRelease ends
// with the object gone before its status is written: the patch helper
// reports the NotFound of that last write inside an aggregate of errors.
// As upstream, it is not a reconcile error (each deleted HelmRelease
// counted one in controller_runtime_reconcile_errors_total, found by
// test/reliability TestLoad).
func TestDeletionIsNotAnErrorWhenTheObjectGoesBeforeItsStatusWrite(t *testing.T) {
	now := metav1.Now()
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 2,
		Finalizers: []string{helmv2.HelmReleaseFinalizer}, DeletionTimestamp: &now,
		// A status field the final write changes besides the conditions.
		Annotations: map[string]string{meta.ReconcileRequestAnnotation: "now"}}}
	obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
	c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(obj).
		WithStatusSubresource(&v2.HelmRelease{}).Build()
	targets, err := connect.NewBuilder(connect.Options{Local: &rest.Config{Host: "https://local.example:6443"}, Client: c})
	if err != nil {
		t.Fatal(err)
	}
	r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: eventlog.New(10), FieldManager: ControllerName,
		Charts: chartsource.New(chartsource.Options{}), Targets: targets}

	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}); err != nil {
		t.Errorf("Reconcile of a deleted HelmRelease: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &v2.HelmRelease{}); !apierrors.IsNotFound(err) {
		t.Errorf("HelmRelease still there after its finalizer went: %v", err)
	}
}
