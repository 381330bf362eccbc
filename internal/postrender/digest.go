package postrender

import (
	"encoding/json"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/opencontainers/go-digest"
)

// PostRenderersDigest is the digest status.observedPostRenderersDigest
// records for spec.postRenderers: the SHA-256 of the list's JSON encoding
// followed by a newline (what a json.Encoder writes), as upstream computes
// it. A nil list has no digest (""); an empty one has.
func PostRenderersDigest(renderers []helmv2.PostRenderer) string {
	if renderers == nil {
		return ""
	}
	return encodedDigest(renderers)
}

// CommonMetadataDigest is PostRenderersDigest for spec.commonMetadata and
// status.observedCommonMetadataDigest.
func CommonMetadataDigest(md *helmv2.CommonMetadata) string {
	if md == nil {
		return ""
	}
	return encodedDigest(md)
}

func encodedDigest(v any) string {
	d := digest.Canonical.Digester()
	// Encoding API types (strings, maps, slices of structs) cannot fail;
	// should it, no digest matches and the release is upgraded, which is
	// the safe side.
	if err := json.NewEncoder(d.Hash()).Encode(v); err != nil {
		return ""
	}
	return d.Digest().String()
}
