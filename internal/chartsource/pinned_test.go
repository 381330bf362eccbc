package chartsource

import (
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
)

func TestPinnedVersion(t *testing.T) {
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name, version, revision string
		wantVersion, wantDigest string
		wantErr                 bool
	}{
		{name: "tag and digest", version: "6.7.1", revision: "6.7.1@sha256:" + hex, wantVersion: "6.7.1+0123456789ab", wantDigest: "sha256:" + hex},
		{name: "digest only", version: "1.0.0", revision: "sha256:" + hex, wantVersion: "1.0.0+0123456789ab", wantDigest: "sha256:" + hex},
		{name: "v-prefixed tag", version: "1.0.0", revision: "v1.0.0@sha256:" + hex, wantVersion: "1.0.0+0123456789ab", wantDigest: "sha256:" + hex},
		{name: "existing metadata replaced", version: "1.0.0+build1", revision: "sha256:" + hex, wantVersion: "1.0.0+0123456789ab", wantDigest: "sha256:" + hex},
		{name: "tag with build metadata as OCI spells it", version: "1.0.0+build.1", revision: "1.0.0_build.1@sha256:" + hex, wantVersion: "1.0.0+0123456789ab", wantDigest: "sha256:" + hex},
		{name: "tag does not match chart", version: "1.0.0", revision: "2.0.0@sha256:" + hex, wantErr: true},
		// As upstream: a tag that is no version (latest) is not compared;
		// the digest pins the chart, and the whole revision is recorded.
		{name: "tag not semver", version: "1.0.0", revision: "latest@sha256:" + hex, wantVersion: "1.0.0+0123456789ab", wantDigest: "latest@sha256:" + hex},
		{name: "short digest", version: "1.0.0", revision: "sha256:abc", wantErr: true},
		{name: "no algorithm", version: "1.0.0", revision: hex, wantErr: true},
		{name: "chart version not semver", version: "one", revision: "sha256:" + hex, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			version, digest, err := PinnedVersion(tc.version, tc.revision)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %q %q, want an error", version, digest)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if version != tc.wantVersion || digest != tc.wantDigest {
				t.Fatalf("got %q %q, want %q %q", version, digest, tc.wantVersion, tc.wantDigest)
			}
		})
	}
}

// TestPinnedToArtifactDigest: which sources pin the chart version to their
// artifact's digest, as upstream: an OCIRepository always, an
// ExternalArtifact when its revision carries a digest, a HelmChart never.
func TestPinnedToArtifactDigest(t *testing.T) {
	cases := []struct {
		kind, revision string
		want           bool
	}{
		{sourcev1.OCIRepositoryKind, "6.7.1@sha256:abc", true},
		{sourcev1.ExternalArtifactKind, "6.7.1@sha256:abc", true},
		{sourcev1.ExternalArtifactKind, "sha256:abc", true},
		{sourcev1.ExternalArtifactKind, "6.7.1", false},
		{sourcev1.HelmChartKind, "6.7.1", false},
	}
	for _, tc := range cases {
		if got := PinnedToArtifactDigest(tc.kind, tc.revision); got != tc.want {
			t.Errorf("PinnedToArtifactDigest(%s, %s) = %v, want %v", tc.kind, tc.revision, got, tc.want)
		}
	}
}
