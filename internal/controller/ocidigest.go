package controller

import (
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// ChartMutateErrorReason: the chart from an OCIRepository could not be
// pinned to its artifact (upstream's reason): the tag names another version
// than the chart's, or the revision has no usable digest.
const ChartMutateErrorReason = "ChartMutateError"

// applyOCIRevision records the digest of the artifact (OCIRepository, or
// ExternalArtifact with a digest) the chart came from in req, and unless
// DisableChartDigestTracking is set, pins the chart's version to it. The digest is recorded either way,
// as upstream does; with the gate set, a digest-only change does not make a
// new release because the version is unchanged.
func (r *HelmReleaseReconciler) applyOCIRevision(req *reconcile.Request, chart *chartsource.Chart, revision string) error {
	version, ociDigest, err := chartsource.PinnedVersion(chart.Metadata.Version, revision)
	if err != nil {
		return err
	}
	req.OCIDigest = ociDigest
	if !r.DisableChartDigestTracking {
		req.Chart = versionedChart{loadedChart{chart}, version}
	}
	return nil
}

// versionedChart presents a cached chart with another version.
type versionedChart struct {
	loadedChart
	version string
}

func (v versionedChart) Metadata() *chartv2.Metadata {
	md := *v.loadedChart.Metadata()
	md.Version = v.version
	return &md
}

func (v versionedChart) Load() (*chartv2.Chart, error) {
	c, err := v.loadedChart.Load()
	if err != nil {
		return nil, err
	}
	c.Metadata.Version = v.version
	return c, nil
}

// loadedChart adapts a cached chart to the state machine's Chart.
type loadedChart struct{ c *chartsource.Chart }

func (l loadedChart) Metadata() *chartv2.Metadata   { return l.c.Metadata }
func (l loadedChart) Load() (*chartv2.Chart, error) { return l.c.Load() }
