package sequencing

import (
	"encoding/json"
	"fmt"
	"maps"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// AnnotationRecord marks, in the chart metadata a release revision
// stores, that the revision was applied in order, and holds the subchart
// facts of its chart (Charts, JSON). Helm keeps only the root chart's
// metadata in a release, and not the fields its loader drops, so a
// rollback to the revision or its uninstall could not work out the
// subchart order again without it.
const AnnotationRecord = "helm.toolkit.fluxcd.io/sequencing"

// record is the annotation's value.
type record struct {
	Charts Charts `json:"charts,omitempty"`
}

// Record returns a copy of chrt whose metadata carries AnnotationRecord
// with charts. chrt itself is not changed: charts are shared between
// releases through the controller's chart cache.
func Record(chrt *chartv2.Chart, charts Charts) (*chartv2.Chart, error) {
	if chrt == nil || chrt.Metadata == nil {
		return chrt, nil
	}
	value, err := json.Marshal(record{Charts: charts})
	if err != nil {
		return nil, fmt.Errorf("recording the sequencing of chart %s: %w", chrt.Name(), err)
	}
	meta := *chrt.Metadata
	meta.Annotations = maps.Clone(chrt.Metadata.Annotations)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[AnnotationRecord] = string(value)
	out := *chrt
	out.Metadata = &meta
	return &out, nil
}

// Recorded reads AnnotationRecord from the chart metadata of a stored
// revision: whether the revision was applied in order, and the subchart
// facts to order it with.
func Recorded(meta *chartv2.Metadata) (Charts, bool, error) {
	if meta == nil {
		return nil, false, nil
	}
	value, ok := meta.Annotations[AnnotationRecord]
	if !ok {
		return nil, false, nil
	}
	var r record
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return nil, true, fmt.Errorf("annotation %s of chart %s: %w", AnnotationRecord, meta.Name, err)
	}
	return r.Charts, true, nil
}
