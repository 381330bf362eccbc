package controller

import (
	"context"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/served"
)

type watchedSource struct {
	kind   string
	object client.Object
	// fix is what an operator does when the API server does not serve the
	// kind.
	fix string
}

// What to do when a watched kind is not served.
const (
	fixSourceCRDs   = "install Flux's source-controller CRDs"
	fixHelmRelease  = "apply this controller's HelmRelease CRD (see docs/install.md)"
	fixGateExternal = fixSourceCRDs + " or turn off the ExternalArtifact feature gate"
)

// watchedSources are the source kinds whose new artifacts start a
// reconcile of the HelmReleases using them. HelmRepository, GitRepository
// and Bucket are not among them: the controller never reads them, a
// chart template reaches them only through the HelmChart source-controller
// builds from it.
func watchedSources(externalArtifacts bool) []watchedSource {
	sources := []watchedSource{
		{sourcev1.HelmChartKind, &sourcev1.HelmChart{}, fixSourceCRDs},
		{sourcev1.OCIRepositoryKind, &sourcev1.OCIRepository{}, fixSourceCRDs},
	}
	if externalArtifacts {
		sources = append(sources, watchedSource{sourcev1.ExternalArtifactKind, &sourcev1.ExternalArtifact{}, fixGateExternal})
	}
	return sources
}

// WatchedKinds lists every kind SetupWithManager watches with the
// reconciler's settings, so that main can check the API server serves
// each before the manager starts (see internal/served).
func (r *HelmReleaseReconciler) WatchedKinds() []served.Kind {
	kinds := []served.Kind{{Object: &v2.HelmRelease{}, Fix: fixHelmRelease}}
	for _, src := range watchedSources(r.WatchExternalArtifacts) {
		kinds = append(kinds, served.Kind{Object: src.object, Fix: src.fix})
	}
	if r.ConfigWatch.Enabled() {
		for _, w := range configWatches() {
			kinds = append(kinds, served.Kind{Object: w.object})
		}
	}
	return kinds
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
		holder, ok := src.(artifactHolder)
		if !ok || holder.GetArtifact() == nil {
			// Nothing to install from yet; its first artifact is an update.
			return nil
		}
		artifact := holder.GetArtifact()
		var list v2.HelmReleaseList
		key := sourceIndexValue(kind, src.GetNamespace(), src.GetName())
		if err := r.List(ctx, &list, client.MatchingFields{helmv2.SourceIndexKey: key}); err != nil {
			return nil
		}
		reqs := make([]ctrlreconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			if attemptedAlready(&list.Items[i], kind, artifact) {
				continue
			}
			reqs = append(reqs, ctrlreconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

// attemptedAlready tells, as upstream's source watches do, that the event
// of a source holding artifact brings nothing new to obj: obj is Ready or
// already reconciling, and its last attempt used that artifact (the chart
// version of a HelmChart, the digest of an OCIRepository, either of an
// ExternalArtifact). A fleet then is not reconciled again for source
// updates that keep the artifact (a source turning Ready again, every
// source seen at start-up); its interval still comes.
func attemptedAlready(obj *v2.HelmRelease, kind string, artifact *meta.Artifact) bool {
	if !conditions.IsReady(obj) && !conditions.IsReconciling(obj) {
		return false
	}
	st := obj.Status
	switch kind {
	case sourcev1.HelmChartKind:
		return st.LastAttemptedRevision != "" && artifact.HasRevision(st.LastAttemptedRevision)
	case sourcev1.OCIRepositoryKind:
		return attemptedDigest(st.LastAttemptedRevisionDigest, artifact.Revision)
	case sourcev1.ExternalArtifactKind:
		if strings.Contains(artifact.Revision, ":") {
			return attemptedDigest(st.LastAttemptedRevisionDigest, artifact.Revision)
		}
		return st.LastAttemptedRevision == artifact.Revision
	}
	return false
}

// attemptedDigest tells whether recorded, a lastAttemptedRevisionDigest,
// is the digest of the artifact revision: the part after "@" that a tag
// which is a version records, or the whole revision that any other tag
// records (chartsource.PinnedVersion).
func attemptedDigest(recorded, revision string) bool {
	if recorded == "" {
		return false
	}
	_, digest, found := strings.Cut(revision, "@")
	return recorded == revision || (found && recorded == digest)
}

// artifactChanged passes source events that bring a new artifact, and, as
// upstream, a source turning Ready with the artifact it had: a release
// that waited on its failing source goes on at once.
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
	if old == nil || old.Digest != newSrc.GetArtifact().Digest || old.Revision != newSrc.GetArtifact().Revision {
		return true
	}
	oldReady, ok1 := e.ObjectOld.(conditions.Getter)
	newReady, ok2 := e.ObjectNew.(conditions.Getter)
	return ok1 && ok2 && !conditions.IsReady(oldReady) && conditions.IsReady(newReady)
}
