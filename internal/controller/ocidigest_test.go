package controller

import (
	"testing"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

func TestOCIChartVersion(t *testing.T) {
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
			version, digest, err := ociChartVersion(tc.version, tc.revision)
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

// TestApplyOCIRevision checks what a chart from an OCIRepository brings to
// the request: the digest is recorded whether or not the digest is tracked
// in the chart version (DisableChartDigestTracking), as upstream does, so
// lastAttemptedRevisionDigest, history[].ociDigest and the oci-digest event
// annotation are kept; only the version is left alone with the gate on.
func TestApplyOCIRevision(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name        string
		disable     bool
		wantVersion string
	}{
		{name: "tracked", wantVersion: "6.7.1+0123456789ab"},
		{name: "tracking disabled", disable: true, wantVersion: "6.7.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &HelmReleaseReconciler{DisableChartDigestTracking: tc.disable}
			chart := &chartsource.Chart{Metadata: &chartv2.Metadata{Name: "podinfo", Version: "6.7.1"}}
			req := &reconcile.Request{Chart: loadedChart{chart}}
			if err := r.applyOCIRevision(req, chart, "6.7.1@"+digest); err != nil {
				t.Fatal(err)
			}
			if req.OCIDigest != digest {
				t.Errorf("OCIDigest %q, want %q", req.OCIDigest, digest)
			}
			if got := req.Chart.Metadata().Version; got != tc.wantVersion {
				t.Errorf("chart version %q, want %q", got, tc.wantVersion)
			}
			if chart.Metadata.Version != "6.7.1" {
				t.Errorf("the cached chart's metadata was changed to %q", chart.Metadata.Version)
			}
			if err := r.applyOCIRevision(req, chart, "7.0.0@"+digest); err == nil {
				t.Error("a tag that does not match the chart version was accepted")
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
		if got := pinnedToArtifactDigest(tc.kind, tc.revision); got != tc.want {
			t.Errorf("pinnedToArtifactDigest(%s, %s) = %v, want %v", tc.kind, tc.revision, got, tc.want)
		}
	}
}
