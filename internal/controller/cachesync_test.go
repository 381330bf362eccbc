package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// laggingCache is the controller's cache with a watch that brings the
// HelmRelease's writes back only lag after they were made: until then a
// read returns the object as it was before the first write not yet seen.
type laggingCache struct {
	client.Client
	lag time.Duration

	mu       sync.Mutex
	stale    *v2.HelmRelease // nil when the cache has caught up
	caughtUp time.Time
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if hr, ok := obj.(*v2.HelmRelease); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.stale != nil && time.Now().Before(c.caughtUp) {
			c.stale.DeepCopyInto(hr)
			return nil
		}
		c.stale = nil
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// written starts the lag at the first write the cache has not seen,
// keeping what it held; writes within the lag come back with it.
func (c *laggingCache) written(ctx context.Context, obj client.Object) {
	hr, ok := obj.(*v2.HelmRelease)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale != nil {
		return
	}
	before := &v2.HelmRelease{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(hr), before); err == nil {
		c.stale = before
		c.caughtUp = time.Now().Add(c.lag)
	}
}

func (c *laggingCache) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.written(ctx, obj)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *laggingCache) Status() client.SubResourceWriter {
	return laggingStatus{SubResourceWriter: c.Client.Status(), cache: c}
}

type laggingStatus struct {
	client.SubResourceWriter
	cache *laggingCache
}

func (s laggingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.cache.written(ctx, obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// A reconcile queued while another one ran (a source event, a request)
// starts the moment that one returns. Reading the HelmRelease from a cache
// that had not yet seen the status just written, it judged an older
// status: in the e2e TestResetAndForceRequests a release whose install
// had used up its retries was read with no failure counted, and upgraded.
// As upstream, a reconcile returns only once the cache shows what it
// wrote.
func TestReconcileReturnsOnceTheCacheShowsItsWrite(t *testing.T) {
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1,
		Finalizers: []string{helmv2.HelmReleaseFinalizer}}}
	hr.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
	// A spec that stalls at once, before any source is read: the reconcile
	// writes the generation observed and the stall, and nothing else runs.
	hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{APIVersion: "example.com/v1", Kind: "Thing",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.ready =="}}}
	api := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
		WithStatusSubresource(&v2.HelmRelease{}).Build()
	cache := &laggingCache{Client: api, lag: 300 * time.Millisecond}
	r := &HelmReleaseReconciler{Client: cache, APIReader: api, EventRecorder: eventlog.New(20), FieldManager: ControllerName}
	key := client.ObjectKeyFromObject(hr)

	_, _ = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	next := &v2.HelmRelease{}
	if err := cache.Get(context.Background(), key, next); err != nil {
		t.Fatal(err)
	}
	if next.Status.ObservedGeneration != 1 {
		t.Errorf("right after the reconcile the cache reads observedGeneration %d, want the 1 it wrote", next.Status.ObservedGeneration)
	}
}

// countingReader counts reads of HelmReleases.
type countingReader struct {
	client.Client
	reads int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v2.HelmRelease); ok {
		c.reads++
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// Only a write of what the next reconcile decides on waits for the cache:
// a fleet's requested or interval reconciles that change nothing else
// (lastHandledReconcileAt, a condition's message) do not read it at all.
func TestAwaitCacheSyncOnlyForDecisions(t *testing.T) {
	tests := []struct {
		name      string
		change    func(st *v2.HelmReleaseStatus)
		wantReads bool
	}{
		{name: "nothing written", change: func(*v2.HelmReleaseStatus) {}},
		{name: "requestedAt handled", change: func(st *v2.HelmReleaseStatus) { st.LastHandledReconcileAt = "now" }},
		{name: "a condition's message: written whole, nothing decided on changed", change: func(st *v2.HelmReleaseStatus) {
			st.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: "Fine",
				Message: "fine", LastTransitionTime: metav1.Now()}}
		}},
		{name: "failure counted", change: func(st *v2.HelmReleaseStatus) { st.InstallFailures++ }, wantReads: true},
		{name: "reset handled", change: func(st *v2.HelmReleaseStatus) { st.LastHandledResetAt = "now" }, wantReads: true},
		{name: "revision recorded", wantReads: true, change: func(st *v2.HelmReleaseStatus) {
			st.History = helmv2.Snapshots{{Name: "web", Namespace: "apps", Version: 2, Status: "deployed",
				FirstDeployed: metav1.Now(), LastDeployed: metav1.Now()}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 1}}
			api := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(hr).
				WithStatusSubresource(&v2.HelmRelease{}).Build()
			obj := &v2.HelmRelease{}
			if err := api.Get(context.Background(), client.ObjectKeyFromObject(hr), obj); err != nil {
				t.Fatal(err)
			}
			patcher := newReleasePatcher(obj, api, ControllerName)
			tc.change(&obj.Status)
			// The API server keeps times to the second; obj, as the
			// patch helper leaves it, keeps its nanoseconds.
			if err := patcher.PatchFinal(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
			cache := &countingReader{Client: api}
			r := &HelmReleaseReconciler{Client: cache}
			start := time.Now()
			r.awaitCacheSync(context.Background(), obj, patcher)
			if got := cache.reads > 0; got != tc.wantReads {
				t.Errorf("cache read %d times, want reads: %v", cache.reads, tc.wantReads)
			}
			if took := time.Since(start); took > cacheSyncTimeout/2 {
				t.Errorf("the wait took %s for a cache that showed the write: it never saw it as equal", took)
			}
		})
	}
}
