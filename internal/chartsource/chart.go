package chartsource

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"

	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"
)

// Chart is a verified chart archive.
type Chart struct {
	// Digest of the archive, "<algorithm>:<hex>".
	Digest string
	// Revision of the artifact this Chart was requested for.
	Revision string
	// Metadata parsed when the archive was downloaded; shared by every Get
	// of the same digest and therefore read-only.
	Metadata *chartv2.Metadata

	archive []byte // verified, never modified
	loads   *atomic.Uint64
}

// withRevision gives each caller its own revision: equal content may be
// published under several revisions (e.g. two OCI tags).
func (c *Chart) withRevision(revision string) *Chart {
	cp := *c
	cp.Revision = revision
	return &cp
}

// Load parses the archive into a chart that the caller owns. Helm actions
// modify the charts they are given (dependency processing drops disabled
// subcharts, for instance), so a parsed chart is never shared.
func (c *Chart) Load() (*chartv2.Chart, error) {
	if c.loads != nil {
		c.loads.Add(1)
	}
	ch, err := parseChart(c.archive)
	if err != nil {
		return nil, fmt.Errorf("loading chart from artifact %s: %w", c.Revision, err)
	}
	return ch, nil
}

var gzipMagic = []byte{0x1f, 0x8b}

// parseChart accepts both a packaged chart and a tarball whose single top
// directory holds the chart (what source-controller produces when it
// extracts a chart from an OCI artifact): Helm strips the first path
// component either way.
func parseChart(data []byte) (*chartv2.Chart, error) {
	if !bytes.HasPrefix(data, gzipMagic) {
		return nil, errors.New("artifact is not a gzipped tar archive")
	}
	files, err := archive.LoadArchiveFiles(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("reading chart archive: %w", err)
	}
	if v := apiVersion(files); v != "" && v != chartv2.APIVersionV1 && v != chartv2.APIVersionV2 {
		return nil, fmt.Errorf("chart apiVersion %q is not supported, only %q and %q", v, chartv2.APIVersionV1, chartv2.APIVersionV2)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		// Helm returns what it loaded so far along with the error (no
		// Chart.yaml, invalid metadata); a half-loaded chart must not look
		// usable to a caller that checks the chart rather than the error.
		return nil, err
	}
	return ch, nil
}

// apiVersion peeks at Chart.yaml so that a chart of a newer API version gets
// a clear error instead of whatever the v2 loader makes of it. Unreadable
// YAML is left for the loader to report.
func apiVersion(files []*archive.BufferedFile) string {
	for _, f := range files {
		if f.Name != "Chart.yaml" {
			continue
		}
		var md struct {
			APIVersion string `json:"apiVersion"`
		}
		if yaml.Unmarshal(f.Data, &md) != nil {
			return ""
		}
		return md.APIVersion
	}
	return ""
}
