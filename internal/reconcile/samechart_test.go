package reconcile

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// loadedChart serves a whole chart as the desired chart.
type loadedChart struct{ c *chartv2.Chart }

func (l loadedChart) Metadata() *chartv2.Metadata   { return l.c.Metadata }
func (l loadedChart) Load() (*chartv2.Chart, error) { return l.c, nil }

func podinfoChart(version string) *chartv2.Chart {
	return &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: "v2", Name: "podinfo", Version: version, AppVersion: "6.7.1"},
		Templates: []*common.File{{Name: "templates/deployment.yaml", Data: []byte("kind: Deployment")}, {Name: "templates/service.yaml", Data: []byte("kind: Service")}},
		Values:    map[string]any{"replicaCount": 1},
		Files:     []*common.File{{Name: "crds/crd.yaml", Data: []byte("kind: CustomResourceDefinition")}},
	}
}

// TestSameChartBesideDigest: a chart whose version only gained or lost the
// digest's build metadata is the same chart when every file Helm records
// is the same; anything else, or anything that cannot be compared, is a
// change.
func TestSameChartBesideDigest(t *testing.T) {
	const plain, tracked = "6.7.1", "6.7.1+0123456789ab"
	cases := []struct {
		name     string
		recorded string // snapshot and release chart version
		desired  func() *chartv2.Chart
		want     bool
	}{
		{name: "HelmChart to OCIRepository", recorded: plain, desired: func() *chartv2.Chart { return podinfoChart(tracked) }, want: true},
		{name: "OCIRepository to HelmChart", recorded: tracked, desired: func() *chartv2.Chart { return podinfoChart(plain) }, want: true},
		{name: "another version", recorded: plain, desired: func() *chartv2.Chart { return podinfoChart("6.7.2+0123456789ab") }},
		{name: "template changed", recorded: plain, desired: func() *chartv2.Chart {
			c := podinfoChart(tracked)
			c.Templates[1] = &common.File{Name: "templates/service.yaml", Data: []byte("kind: Service # changed")}
			return c
		}},
		{name: "default values changed", recorded: plain, desired: func() *chartv2.Chart {
			c := podinfoChart(tracked)
			c.Values = map[string]any{"replicaCount": 2}
			return c
		}},
		{name: "crd changed", recorded: plain, desired: func() *chartv2.Chart {
			c := podinfoChart(tracked)
			c.Files = []*common.File{{Name: "crds/crd.yaml", Data: []byte("kind: CustomResourceDefinition # v2")}}
			return c
		}},
		{name: "metadata changed", recorded: plain, desired: func() *chartv2.Chart {
			c := podinfoChart(tracked)
			c.Metadata.AppVersion = "6.7.2"
			return c
		}},
		{name: "subcharts cannot be compared", recorded: plain, desired: func() *chartv2.Chart {
			c := podinfoChart(tracked)
			c.Metadata.Dependencies = []*chartv2.Dependency{{Name: "redis", Version: "1.0.0"}}
			c.AddDependency(&chartv2.Chart{Metadata: &chartv2.Metadata{Name: "redis", Version: "1.0.0"}})
			return c
		}},
		{name: "same version", recorded: plain, desired: func() *chartv2.Chart { return podinfoChart(plain) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{"a": "b"}
			req := &Request{Chart: loadedChart{tc.desired()}, Values: values, ConfigDigest: "sha256:values"}
			recorded := &helmv2.Snapshot{ChartName: "podinfo", ChartVersion: tc.recorded, ConfigDigest: "sha256:values"}
			rel := &releasev1.Release{Chart: podinfoChart(tc.recorded)}
			got := onlyBuildMetadataChanged(req, recorded) && sameChart(req, rel)
			if got != tc.want {
				t.Errorf("same chart = %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("values changed", func(t *testing.T) {
		req := &Request{Chart: loadedChart{podinfoChart(tracked)}, ConfigDigest: "sha256:new"}
		if onlyBuildMetadataChanged(req, &helmv2.Snapshot{ChartName: "podinfo", ChartVersion: plain, ConfigDigest: "sha256:old"}) {
			t.Error("new values count as an unchanged chart")
		}
	})
	t.Run("no release record", func(t *testing.T) {
		if sameChart(&Request{Chart: loadedChart{podinfoChart(tracked)}}, nil) {
			t.Error("a missing release counts as the same chart")
		}
	})
}
