package controller

import (
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

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
