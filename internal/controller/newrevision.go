package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/runner"
)

// newRevisionPollInterval is how often a running reconcile looks for a
// reason to start a new one. The reads hit the informer cache.
const newRevisionPollInterval = 2 * time.Second

// newRevisionWatch notices, while a reconcile runs, a change that queues a
// new reconcile of the same HelmRelease: a new generation (spec change), a
// reconcile request (reconcile.fluxcd.io/requestedAt: flux reconcile,
// notification-controller receivers), a new source artifact, or a change
// to a watched ConfigMap or Secret of spec.valuesFrom. It then cancels
// Context, which bounds the readiness waits of the reconcile's Helm
// actions (the CancelHealthCheckOnNewRevision feature gate).
//
// It compares against what the reconcile started from rather than
// listening to the work queue: the controller's watches stay as they are,
// and every change it reacts to is one those watches enqueue too (same
// fields, same predicates), so a new reconcile is always on its way.
type newRevisionWatch struct {
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	trigger string
}

// The runner abandons its waits through it.
var _ runner.NewRevision = (*newRevisionWatch)(nil)

// revisionBaseline is what a reconcile started from.
type revisionBaseline struct {
	key              client.ObjectKey
	generation       int64
	requestedAt      string
	source           sourceObject
	sourceKey        client.ObjectKey
	sourceKind       string
	artifactDigest   string
	artifactRevision string
	// configs maps the watched ConfigMaps and Secrets of spec.valuesFrom
	// to their resourceVersion.
	configs map[configRef]string
}

// configRef is a ConfigMap or Secret in the HelmRelease's namespace.
type configRef struct{ kind, name string }

// watchForNewRevision starts a newRevisionWatch for obj, whose chart comes
// from artifact. Stop it when the reconcile ends. It returns nil when the
// CancelHealthCheckOnNewRevision gate is off.
func (r *HelmReleaseReconciler) watchForNewRevision(ctx context.Context, obj *v2.HelmRelease, artifact *meta.Artifact) *newRevisionWatch {
	if !r.CancelHealthCheckOnNewRevision {
		return nil
	}
	base := r.baselineOf(ctx, obj, artifact)
	return startNewRevisionWatch(ctx, newRevisionPollInterval, func(ctx context.Context) string {
		return r.newRevisionTrigger(ctx, base)
	})
}

// baselineOf records what a reconcile of obj with artifact starts from.
func (r *HelmReleaseReconciler) baselineOf(ctx context.Context, obj *v2.HelmRelease, artifact *meta.Artifact) revisionBaseline {
	base := revisionBaseline{
		key:         client.ObjectKeyFromObject(obj),
		generation:  obj.Generation,
		requestedAt: obj.GetAnnotations()[meta.ReconcileRequestAnnotation],
		sourceKind:  sourceKind(obj),
	}
	if artifact != nil {
		base.artifactDigest, base.artifactRevision = artifact.Digest, artifact.Revision
	}
	if src, key, err := r.sourceFor(obj); err == nil {
		base.source, base.sourceKey = src, key
	}
	base.configs = r.watchedConfigVersions(ctx, obj)
	return base
}

// startNewRevisionWatch polls check every interval until it names a
// trigger or Stop is called.
func startNewRevisionWatch(parent context.Context, interval time.Duration, check func(context.Context) string) *newRevisionWatch {
	// The wait context must outlive nothing but the reconcile; it is
	// cancelled by a trigger, by Stop or with the reconcile's context.
	ctx, cancel := context.WithCancelCause(parent)
	w := &newRevisionWatch{ctx: ctx, cancel: func() { cancel(nil) }, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if trigger := check(ctx); trigger != "" {
				w.mu.Lock()
				w.trigger = trigger
				w.mu.Unlock()
				ctrl.LoggerFrom(parent).Info("new reconciliation triggered, canceling health checks", "trigger", trigger)
				// The cause names the trigger to whoever fails the
				// abandoned revision (see afterhooks.Action.Abandon).
				cancel(&reconcile.HealthCheckCanceledError{Trigger: trigger, Err: context.Canceled})
				return
			}
		}
	}()
	return w
}

// Context is cancelled once a trigger is seen (or the watch stops). A nil
// watch has none.
func (w *newRevisionWatch) Context() context.Context {
	if w == nil {
		return nil
	}
	return w.ctx
}

// Trigger names what asked for a new reconcile ("Kind/namespace/name"),
// or is empty.
func (w *newRevisionWatch) Trigger() string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.trigger
}

// Stop ends the polling; the trigger, if any, stays readable.
func (w *newRevisionWatch) Stop() {
	if w == nil {
		return
	}
	w.cancel()
	<-w.done
}

// canceled turns an action error caused by the watch into a
// *reconcile.HealthCheckCanceledError; other errors pass unchanged.
func (w *newRevisionWatch) canceled(err error) error {
	return reconcile.CanceledBy(w.Trigger(), err)
}

// newRevisionTrigger compares the cluster with base and names the first
// difference that queues a new reconcile, or returns "". Read errors are
// not triggers: the wait goes on as without the gate.
func (r *HelmReleaseReconciler) newRevisionTrigger(ctx context.Context, base revisionBaseline) string {
	hrRef := fmt.Sprintf("%s/%s/%s", helmv2.HelmReleaseKind, base.key.Namespace, base.key.Name)
	current := &v2.HelmRelease{}
	if err := r.Get(ctx, base.key, current); err != nil {
		return ""
	}
	if current.Generation != base.generation || current.GetAnnotations()[meta.ReconcileRequestAnnotation] != base.requestedAt {
		return hrRef
	}
	if base.source != nil {
		src := base.source.DeepCopyObject().(sourceObject)
		// Read the source as sourceArtifact did for the baseline: a cache
		// lagging behind a direct read would look like a new artifact.
		if err := r.sourceReader().Get(ctx, base.sourceKey, src); err == nil {
			if a := src.GetArtifact(); a != nil && (a.Digest != base.artifactDigest || a.Revision != base.artifactRevision) {
				return fmt.Sprintf("%s/%s/%s", base.sourceKind, base.sourceKey.Namespace, base.sourceKey.Name)
			}
		}
	}
	for ref, version := range r.watchedConfigVersions(ctx, current) {
		if base.configs[ref] != version {
			return fmt.Sprintf("%s/%s/%s", ref.kind, base.key.Namespace, ref.name)
		}
	}
	return ""
}

// watchedConfigVersions returns the resourceVersion of every ConfigMap and
// Secret of obj's spec.valuesFrom whose changes the controller watches
// (none when config watches are off). Objects that cannot be read are left
// out.
func (r *HelmReleaseReconciler) watchedConfigVersions(ctx context.Context, obj *v2.HelmRelease) map[configRef]string {
	if !r.ConfigWatch.Enabled() {
		return nil
	}
	out := map[configRef]string{}
	for _, ref := range obj.Spec.ValuesFrom {
		if ref.Kind != "ConfigMap" && ref.Kind != "Secret" {
			continue
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: ref.Kind})
		if err := r.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: ref.Name}, m); err != nil {
			continue
		}
		if !r.ConfigWatch.Selector.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		out[configRef{kind: ref.Kind, name: ref.Name}] = m.GetResourceVersion()
	}
	return out
}
