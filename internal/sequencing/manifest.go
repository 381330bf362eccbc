package sequencing

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// sourcePrefix starts the comment Helm puts above every document of a
// release manifest, naming the template that rendered it. Helm keeps it
// through post-rendering (it carries the name in an annotation meanwhile).
const sourcePrefix = "# Source: "

// ChartPath returns the chart path (see Resource.Chart) of a template
// source name such as "shop/charts/db/templates/statefulset.yaml", which is
// "shop/db". A source without a templates directory counts as the root
// chart's.
func ChartPath(source string) string {
	segments := strings.Split(source, "/")
	path := segments[0]
	for i := 1; i+1 < len(segments) && segments[i] == "charts"; i += 2 {
		path += "/" + segments[i+1]
	}
	return path
}

// header is the part of an object sequencing reads.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	// Items holds the objects of a List kind, which Helm applies one by
	// one.
	Items []header `json:"items"`
}

// ParseManifest reads a release manifest as Helm records it: documents
// separated by "---", each below a "# Source:" comment. Documents without
// an object (empty, comments only) are skipped.
func ParseManifest(manifest string) ([]Resource, error) {
	var out []Resource
	for i, doc := range splitDocuments(manifest) {
		var h header
		if err := yaml.Unmarshal([]byte(doc.content), &h); err != nil {
			return nil, fmt.Errorf("manifest document %d (%s): %w", i+1, doc.source, err)
		}
		out = append(out, h.resources(ChartPath(doc.source))...)
	}
	return out, nil
}

func (h header) resources(chart string) []Resource {
	if h.Kind == "" {
		return nil
	}
	if strings.HasSuffix(h.Kind, "List") && len(h.Items) > 0 {
		var out []Resource
		for _, item := range h.Items {
			out = append(out, item.resources(chart)...)
		}
		return out
	}
	gv, _ := schema.ParseGroupVersion(h.APIVersion)
	return []Resource{{
		ID:          ObjectID{Group: gv.Group, Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: h.Metadata.Name},
		Chart:       chart,
		Annotations: h.Metadata.Annotations,
	}}
}

type document struct {
	source  string
	content string
}

// splitDocuments splits a manifest as Helm splits a release manifest
// (releaseutil.SplitManifests drops empty documents), in order, and takes
// each document's source from its "# Source:" comment. The comment stays
// in the content, where YAML ignores it.
func splitDocuments(manifest string) []document {
	split := releaseutil.SplitManifests(manifest)
	keys := slices.Collect(maps.Keys(split))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	docs := make([]document, 0, len(keys))
	for _, key := range keys {
		docs = append(docs, document{source: sourceOf(split[key]), content: split[key]})
	}
	return docs
}

// sourceOf returns the template name of doc's first "# Source:" comment,
// or "".
func sourceOf(doc string) string {
	for line := range strings.Lines(doc) {
		if name, ok := strings.CutPrefix(line, sourcePrefix); ok {
			return strings.TrimSpace(name)
		}
	}
	return ""
}
