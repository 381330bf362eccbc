package controller

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestMarkInProgressHoldsBackForASettledRelease: a reconcile of a
// HelmRelease whose generation was reconciled successfully writes its
// Reconciling mark only once it does more than check (begin); any other
// writes it at once, as upstream writes it at the start of every
// reconcile. Either way the object in memory is marked.
func TestMarkInProgressHoldsBackForASettledRelease(t *testing.T) {
	settled := func(hr *v2.HelmRelease) {
		hr.Status.ObservedGeneration = hr.Generation
		conditions.MarkTrue(hr, meta.ReadyCondition, "UpgradeSucceeded", "Helm upgrade succeeded")
	}
	cases := []struct {
		name       string
		mutate     func(*v2.HelmRelease)
		wantAtOnce bool
	}{
		{name: "settled", mutate: settled},
		{name: "new generation", mutate: func(hr *v2.HelmRelease) { settled(hr); hr.Status.ObservedGeneration-- }, wantAtOnce: true},
		{name: "never reconciled", mutate: func(*v2.HelmRelease) {}, wantAtOnce: true},
		{name: "not ready", mutate: func(hr *v2.HelmRelease) {
			settled(hr)
			conditions.MarkFalse(hr, meta.ReadyCondition, "UpgradeFailed", "boom")
		}, wantAtOnce: true},
		{name: "stalled", mutate: func(hr *v2.HelmRelease) {
			settled(hr)
			conditions.MarkStalled(hr, "RetriesExceeded", "Failed to upgrade after 1 attempt(s)")
		}, wantAtOnce: true},
		{name: "still reconciling", mutate: func(hr *v2.HelmRelease) {
			settled(hr)
			conditions.MarkReconciling(hr, meta.ProgressingWithRetryReason, "retrying")
		}, wantAtOnce: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 3}}
			tc.mutate(hr)
			writes := 0
			c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
				WithStatusSubresource(&v2.HelmRelease{}).WithInterceptorFuncs(interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
					writes++
					return c.SubResource(sub).Patch(ctx, obj, p, opts...)
				},
			}).Build()
			obj := &v2.HelmRelease{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hr), obj); err != nil {
				t.Fatal(err)
			}
			patcher := newReleasePatcher(obj, c, ControllerName)
			r := &HelmReleaseReconciler{Client: c, FieldManager: ControllerName}
			progress := &progressReporter{ctx: ctx, obj: obj, patcher: patcher, owner: r.FieldManager}

			if err := r.markInProgress(ctx, patcher, obj, progress); err != nil {
				t.Fatal(err)
			}
			if !conditions.IsReconciling(obj) {
				t.Error("the object in memory is not marked Reconciling")
			}
			if got := writes > 0; got != tc.wantAtOnce {
				t.Fatalf("written at once: %v (%d writes), want %v", got, writes, tc.wantAtOnce)
			}
			atStart := writes
			progress.begin()
			afterFirst := writes
			progress.begin()
			if wrote := afterFirst > atStart; wrote == tc.wantAtOnce {
				t.Errorf("begin wrote: %v, want %v", wrote, !tc.wantAtOnce)
			}
			if writes != afterFirst {
				t.Errorf("a second begin wrote again")
			}
			stored := &v2.HelmRelease{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(hr), stored); err != nil {
				t.Fatal(err)
			}
			if r := conditions.Get(stored, meta.ReconcilingCondition); r == nil || r.Message != "Fulfilling prerequisites" {
				t.Errorf("stored Reconciling %+v after begin, want Fulfilling prerequisites", r)
			}
		})
	}
}
