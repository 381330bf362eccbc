package reconcile

import (
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/afterhooks/helm-controller/internal/postrender"
)

// postRenderChange tells how the post renderers or the common metadata of
// the spec differ from those the release was made with, as recorded in
// status.observedPostRenderersDigest and status.observedCommonMetadataDigest;
// "" when they do not. Either change needs an upgrade, as upstream does:
// Helm's stored values and chart do not show it.
func postRenderChange(req *Request) string {
	obj := req.Object
	switch {
	case changed(req, postrender.PostRenderersDigest(obj.Spec.PostRenderers), obj.Status.ObservedPostRenderersDigest):
		return "post renderers changed"
	case changed(req, postrender.CommonMetadataDigest(obj.Spec.CommonMetadata), obj.Status.ObservedCommonMetadataDigest):
		return "common metadata changed"
	}
	return ""
}

// changed compares a desired digest with the observed one. An empty
// observed digest on a HelmRelease whose current generation already
// reconciled to Ready is adopted, not a change: controllers that did not
// record the digest (upstream before API v2) made that release from this
// very spec. Upstream adopts such releases the same way.
func changed(req *Request, desired, observed string) bool {
	if desired == observed {
		return false
	}
	obj := req.Object
	adoptable := observed == "" && obj.Status.ObservedGeneration == obj.Generation && conditions.IsTrue(obj, meta.ReadyCondition)
	return !adoptable
}

// recordPostRenderDigests records that the release in storage was made
// with (or, when adopted, matches) the spec's post renderers and common
// metadata.
func recordPostRenderDigests(req *Request) {
	obj := req.Object
	obj.Status.ObservedPostRenderersDigest = postrender.PostRenderersDigest(obj.Spec.PostRenderers)
	obj.Status.ObservedCommonMetadataDigest = postrender.CommonMetadataDigest(obj.Spec.CommonMetadata)
}
