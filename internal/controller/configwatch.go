package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Field indexes on HelmReleases naming the ConfigMaps and Secrets their
// spec.valuesFrom reads, each as "<namespace>/<name>".
const (
	valuesFromConfigMapsIndexKey = ".spec.valuesFrom.configMaps"
	valuesFromSecretsIndexKey    = ".spec.valuesFrom.secrets"
)

// ConfigWatchOptions controls whether changes to ConfigMaps and Secrets
// referenced in spec.valuesFrom start a reconcile of the HelmReleases that
// read them.
type ConfigWatchOptions struct {
	// Selector picks the ConfigMaps and Secrets that are watched
	// (--watch-configs-label-selector). Nil turns the watches off, as the
	// DisableConfigWatchers feature gate does.
	Selector labels.Selector
}

// Enabled reports whether ConfigMaps and Secrets are watched at all.
func (o ConfigWatchOptions) Enabled() bool {
	return o.Selector != nil
}

// NewConfigWatchOptions turns the value of --watch-configs-label-selector
// and the DisableConfigWatchers feature gate into ConfigWatchOptions. An
// empty selector watches every ConfigMap and Secret.
func NewConfigWatchOptions(selector string, disabled bool) (ConfigWatchOptions, error) {
	if disabled {
		return ConfigWatchOptions{}, nil
	}
	if selector == "" {
		return ConfigWatchOptions{Selector: labels.Everything()}, nil
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return ConfigWatchOptions{}, fmt.Errorf("invalid --watch-configs-label-selector %q: %w", selector, err)
	}
	return ConfigWatchOptions{Selector: sel}, nil
}

// MustConfigWatchOptions is NewConfigWatchOptions for a selector that has
// been validated already; it panics on an invalid one.
func MustConfigWatchOptions(selector string, disabled bool) ConfigWatchOptions {
	o, err := NewConfigWatchOptions(selector, disabled)
	if err != nil {
		panic(err)
	}
	return o
}

// configIndexValue is how the valuesFrom indexes name a ConfigMap or Secret.
func configIndexValue(namespace, name string) string {
	return namespace + "/" + name
}

// valuesFromIndexer returns an index function listing the objects of one
// kind ("ConfigMap" or "Secret") that a HelmRelease's spec.valuesFrom or
// spec.kubeConfig reads.
// References always resolve in the HelmRelease's own namespace.
func valuesFromIndexer(kind string) client.IndexerFunc {
	return func(o client.Object) []string {
		obj, ok := o.(*v2.HelmRelease)
		if !ok {
			return nil
		}
		var names []string
		for _, ref := range obj.Spec.ValuesFrom {
			if ref.Kind == kind {
				names = append(names, ref.Name)
			}
		}
		// A rotated kubeconfig (spec.kubeConfig) reconciles too, as
		// upstream does for labelled kubeconfig Secrets and ConfigMaps.
		if kc := obj.Spec.KubeConfig; kc != nil {
			switch {
			case kind == "Secret" && kc.SecretRef != nil:
				names = append(names, kc.SecretRef.Name)
			case kind == "ConfigMap" && kc.ConfigMapRef != nil:
				names = append(names, kc.ConfigMapRef.Name)
			}
		}
		var keys []string
		for _, name := range names {
			if name == "" {
				continue
			}
			key := configIndexValue(obj.Namespace, name)
			if !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
		return keys
	}
}

// configWatch describes the watch of one kind referenced by valuesFrom.
type configWatch struct {
	kind     string
	indexKey string
	object   client.Object
}

func configWatches() []configWatch {
	return []configWatch{
		{kind: "ConfigMap", indexKey: valuesFromConfigMapsIndexKey, object: &corev1.ConfigMap{}},
		{kind: "Secret", indexKey: valuesFromSecretsIndexKey, object: &corev1.Secret{}},
	}
}

// setupConfigWatches indexes HelmReleases by the ConfigMaps and Secrets in
// their spec.valuesFrom and makes b watch the metadata of those kinds, so a
// change to a selected object reconciles the HelmReleases reading it. With
// watches disabled (nil selector) b is returned unchanged.
func (r *HelmReleaseReconciler) setupConfigWatches(ctx context.Context, mgr ctrl.Manager, b *builder.Builder, opts ConfigWatchOptions) (*builder.Builder, error) {
	if !opts.Enabled() {
		return b, nil
	}
	for _, w := range configWatches() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, &v2.HelmRelease{}, w.indexKey, valuesFromIndexer(w.kind)); err != nil {
			return nil, fmt.Errorf("indexing HelmReleases by valuesFrom %ss: %w", w.kind, err)
		}
		b = b.WatchesMetadata(w.object,
			handler.EnqueueRequestsFromMapFunc(r.requestsForConfig(w.indexKey)),
			builder.WithPredicates(configChanged{selector: opts.Selector}))
	}
	return b, nil
}

// requestsForConfig maps a ConfigMap or Secret (metadata only) to the
// HelmReleases whose valuesFrom reads it, through the given index.
func (r *HelmReleaseReconciler) requestsForConfig(indexKey string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrlreconcile.Request {
		var list v2.HelmReleaseList
		key := configIndexValue(o.GetNamespace(), o.GetName())
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexKey: key}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing HelmReleases that read a changed object", "index", indexKey, "object", key)
			return nil
		}
		reqs := make([]ctrlreconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, ctrlreconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// configChanged passes events of ConfigMaps and Secrets carrying the
// selected labels: creations, deletions, and updates that changed the
// object. Metadata-only objects have no data to compare, but every write
// of the data changes the resourceVersion; resyncs keep it and are dropped.
// An update passes when the old or the new object is selected, so adding
// or removing the label counts like a creation or deletion.
type configChanged struct {
	selector labels.Selector
}

func (p configChanged) selected(o client.Object) bool {
	return o != nil && p.selector != nil && p.selector.Matches(labels.Set(o.GetLabels()))
}

func (p configChanged) Create(e event.CreateEvent) bool   { return p.selected(e.Object) }
func (p configChanged) Delete(e event.DeleteEvent) bool   { return p.selected(e.Object) }
func (p configChanged) Generic(e event.GenericEvent) bool { return p.selected(e.Object) }
func (p configChanged) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	if e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion() {
		return false
	}
	return p.selected(e.ObjectOld) || p.selected(e.ObjectNew)
}
