package chartsource

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
)

// ociDigestLength is how many hex characters of the OCI manifest digest go
// into the chart version's build metadata, as upstream does.
const ociDigestLength = 12

// PinnedVersion pins a chart from an OCIRepository (or an ExternalArtifact
// whose revision has a digest) to the artifact it came from: the version
// gets the digest as semver build metadata ("6.7.1+0123456789ab"), so a tag
// that moves to new content upgrades the release. revision is the artifact
// revision, "<tag>@<algo>:<hex>" or "<algo>:<hex>". A tag that is a version
// must be the chart's; one that is not (latest, a branch) is not compared,
// and the whole revision stands for the digest, as upstream records it. It
// returns the new version and the digest.
func PinnedVersion(chartVersion, revision string) (string, string, error) {
	ver, err := semver.NewVersion(chartVersion)
	if err != nil {
		return "", "", fmt.Errorf("chart version %q is not semver: %w", chartVersion, err)
	}
	digest := revision
	if tag, d, found := strings.Cut(revision, "@"); found {
		// OCI tags cannot hold '+': Helm pushes build metadata as '_'.
		if tagVer, err := semver.NewVersion(strings.ReplaceAll(tag, "_", "+")); err == nil {
			if !tagVer.Equal(ver) {
				return "", "", fmt.Errorf("artifact revision %s does not match chart version %s", tag, chartVersion)
			}
			digest = d
		}
	}
	parts := strings.Split(digest, ":")
	if len(parts) != 2 || len(parts[1]) < ociDigestLength {
		return "", "", fmt.Errorf("artifact revision %s has no valid digest", revision)
	}
	withMeta, err := ver.SetMetadata(parts[1][:ociDigestLength])
	if err != nil {
		return "", "", fmt.Errorf("adding the digest to chart version %s: %w", chartVersion, err)
	}
	return withMeta.String(), digest, nil
}

// PinnedToArtifactDigest tells whether a chart from a source of kind, at
// the artifact revision, has its version pinned to the artifact's digest
// (applyOCIRevision), as upstream: an OCIRepository's always, an
// ExternalArtifact's when its revision carries a digest.
func PinnedToArtifactDigest(kind, revision string) bool {
	switch kind {
	case sourcev1.OCIRepositoryKind:
		return true
	case sourcev1.ExternalArtifactKind:
		return strings.Contains(revision, ":")
	}
	return false
}
