package reconcile

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/Masterminds/semver/v3"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// onlyBuildMetadataChanged tells whether the desired chart differs from the
// one s was made with by nothing but the build metadata of its version:
// same name, same values, versions equal but for the "+..." part. That is
// what digest tracking does to an unchanged chart when its source changes
// between a HelmChart (plain version) and an OCIRepository (version plus
// the manifest digest), as when a chart template switches kind.
func onlyBuildMetadataChanged(req *Request, s *helmv2.Snapshot) bool {
	md := req.Chart.Metadata()
	if s.ChartName != md.Name || s.ChartVersion == md.Version || !req.valuesMatch(s.ConfigDigest) {
		return false
	}
	was, err1 := semver.NewVersion(s.ChartVersion)
	now, err2 := semver.NewVersion(md.Version)
	return err1 == nil && err2 == nil && was.Equal(now)
}

// sameChart tells whether the desired chart is, file for file, the chart
// rel was made from, apart from its version. Helm's record keeps a chart's
// metadata, templates, values, schema and files, but not its subcharts: a
// chart with dependencies cannot be compared and counts as changed, as
// does any chart that fails to load. A wrong "changed" costs a revision;
// a wrong "same" would leave a changed chart undeployed, so every doubt
// answers false.
func sameChart(req *Request, rel *releasev1.Release) bool {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil || len(req.Chart.Metadata().Dependencies) > 0 {
		return false
	}
	want, err := req.Chart.Load()
	if err != nil || want.Metadata == nil || len(want.Dependencies()) > 0 || len(rel.Chart.Dependencies()) > 0 {
		return false
	}
	have := rel.Chart
	return sameJSON(withoutVersion(have.Metadata), withoutVersion(want.Metadata)) &&
		sameJSON(have.Lock, want.Lock) &&
		sameJSON(have.Values, want.Values) &&
		bytes.Equal(have.Schema, want.Schema) &&
		sameFiles(have.Templates, want.Templates) &&
		sameFiles(have.Files, want.Files)
}

func withoutVersion(md *chartv2.Metadata) chartv2.Metadata {
	out := *md
	out.Version = ""
	return out
}

// sameJSON compares two values by their JSON form, as Helm stores them:
// numbers and empty maps read back from storage compare equal to those of
// a freshly loaded chart.
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// sameFiles compares files by name and content, in any order.
func sameFiles(a, b []*common.File) bool {
	if len(a) != len(b) {
		return false
	}
	byName := func(files []*common.File) []*common.File {
		out := slices.Clone(files)
		slices.SortFunc(out, func(x, y *common.File) int {
			switch {
			case x.Name < y.Name:
				return -1
			case x.Name > y.Name:
				return 1
			}
			return 0
		})
		return out
	}
	sa, sb := byName(a), byName(b)
	for i := range sa {
		if sa[i].Name != sb[i].Name || !bytes.Equal(sa[i].Data, sb[i].Data) {
			return false
		}
	}
	return true
}
