package controller

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

type watchedSource struct {
	kind   string
	object client.Object
}

// watchedSources are the source kinds whose new artifacts start a
// reconcile of the HelmReleases using them.
func watchedSources(externalArtifacts bool) []watchedSource {
	sources := []watchedSource{
		{sourcev1.HelmChartKind, &sourcev1.HelmChart{}},
		{sourcev1.OCIRepositoryKind, &sourcev1.OCIRepository{}},
	}
	if externalArtifacts {
		sources = append(sources, watchedSource{sourcev1.ExternalArtifactKind, &sourcev1.ExternalArtifact{}})
	}
	return sources
}

// sourceIndexValue is how the source index names a source.
func sourceIndexValue(kind, namespace, name string) string {
	return fmt.Sprintf("%s/%s/%s", kind, namespace, name)
}

// indexBySource indexes a HelmRelease by the source its chart comes from.
func indexBySource(o client.Object) []string {
	obj, ok := o.(*v2.HelmRelease)
	if !ok {
		return nil
	}
	if ref := obj.Spec.ChartRef; ref != nil {
		ns := ref.Namespace
		if ns == "" {
			ns = obj.Namespace
		}
		return []string{sourceIndexValue(ref.Kind, ns, ref.Name)}
	}
	if ref := obj.GetHelmChartTemplateReference(); ref != nil {
		return []string{sourceIndexValue(ref.Kind, ref.Namespace, ref.Name)}
	}
	return nil
}

// requestsForSource maps a source to the HelmReleases that use it.
func (r *HelmReleaseReconciler) requestsForSource(kind string) func(context.Context, client.Object) []ctrlreconcile.Request {
	return func(ctx context.Context, src client.Object) []ctrlreconcile.Request {
		var list v2.HelmReleaseList
		key := sourceIndexValue(kind, src.GetNamespace(), src.GetName())
		if err := r.List(ctx, &list, client.MatchingFields{helmv2.SourceIndexKey: key}); err != nil {
			return nil
		}
		reqs := make([]ctrlreconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, ctrlreconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// artifactChanged passes source events that bring a new artifact.
type artifactChanged struct{ predicate.Funcs }

type artifactHolder interface {
	GetArtifact() *meta.Artifact
}

func (artifactChanged) Create(event.CreateEvent) bool   { return true }
func (artifactChanged) Delete(event.DeleteEvent) bool   { return false }
func (artifactChanged) Generic(event.GenericEvent) bool { return false }
func (artifactChanged) Update(e event.UpdateEvent) bool {
	oldSrc, ok1 := e.ObjectOld.(artifactHolder)
	newSrc, ok2 := e.ObjectNew.(artifactHolder)
	if !ok1 || !ok2 || newSrc.GetArtifact() == nil {
		return false
	}
	old := oldSrc.GetArtifact()
	return old == nil || old.Digest != newSrc.GetArtifact().Digest || old.Revision != newSrc.GetArtifact().Revision
}
