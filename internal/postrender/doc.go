// Package postrender builds the Helm post renderer of a HelmRelease: the
// Kustomize post renderers of spec.postRenderers in their order, then the
// labels and annotations of spec.commonMetadata, then the origin labels
// (helm.toolkit.fluxcd.io/name and /namespace) that upstream helm-controller
// puts on every object it deploys. Helm runs the result on the rendered
// manifests of an install or upgrade before it applies anything, so a
// failing post renderer fails the action with nothing applied.
//
// It also computes the digests recorded in status.observedPostRenderersDigest
// and status.observedCommonMetadataDigest, byte for byte as upstream does, so
// releases that upstream made are adopted without a new revision.
package postrender
