package postrender

import (
	"bytes"
	"fmt"
	"maps"
	"slices"

	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// metadataRenderer sets labels and annotations in the top-level metadata of
// every object, overriding values the chart set for the same keys. Like
// upstream, it leaves pod templates and selectors alone: a label added to a
// Deployment's selector would make the next upgrade fail, since selectors
// are immutable.
type metadataRenderer struct {
	labels      map[string]string
	annotations map[string]string
}

func (r *metadataRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	if len(r.labels) == 0 && len(r.annotations) == 0 {
		return in, nil
	}
	nodes, err := kio.ParseAll(in.String())
	if err != nil {
		return nil, fmt.Errorf("parsing the rendered manifests: %w", err)
	}
	for _, n := range nodes {
		// Sorted keys make the output, and so the stored manifest, the same
		// on every run.
		for _, k := range slices.Sorted(maps.Keys(r.labels)) {
			if err := setMetadata(n, kyaml.LabelsField, k, r.labels[k]); err != nil {
				return nil, fmt.Errorf("setting label %s on %s: %w", k, describe(n), err)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(r.annotations)) {
			if err := setMetadata(n, kyaml.AnnotationsField, k, r.annotations[k]); err != nil {
				return nil, fmt.Errorf("setting annotation %s on %s: %w", k, describe(n), err)
			}
		}
	}
	out, err := kio.StringAll(nodes)
	if err != nil {
		return nil, fmt.Errorf("writing the manifests: %w", err)
	}
	return bytes.NewBufferString(out), nil
}

// setMetadata sets metadata.<field>.<key> to value, creating the map when
// the object has none. Unlike kyaml's SetLabel it does not force quotes on
// every value: values are quoted only where YAML would read them as
// something other than a string, as kustomize's own transformers write
// them.
func setMetadata(n *kyaml.RNode, field, key, value string) error {
	return n.PipeE(
		kyaml.PathGetter{Path: []string{kyaml.MetadataField, field}, Create: kyaml.MappingNode},
		kyaml.FieldSetter{Name: key, Value: kyaml.NewStringRNode(value)},
	)
}

// describe names an object in an error message.
func describe(n *kyaml.RNode) string {
	return n.GetKind() + "/" + n.GetName()
}
