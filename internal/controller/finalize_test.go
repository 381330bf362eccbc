package controller

import (
	"context"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/patch"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2 "github.com/afterhooks/helm-controller/api/v2"
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
	patcher := patch.NewSerialPatcher(obj, c)

	ctx, cancel := context.WithCancel(context.Background())
	obj.Status.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, Status: "deployed", ChartVersion: "1.0.0"}}
	cancel() // SIGTERM arrived while Helm finished
	if err := r.finalizeStatus(ctx, patcher, obj, context.Canceled); err != nil {
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
