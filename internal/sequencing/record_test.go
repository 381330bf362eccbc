package sequencing

import (
	"reflect"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

func TestRecordRoundTrip(t *testing.T) {
	original := &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "shop", Annotations: map[string]string{"team": "web"}}}
	charts := Charts{"shop": {DependsOn: []string{"db"}, Dependencies: map[string][]string{"db": nil}}}

	recorded, err := Record(original, charts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := original.Metadata.Annotations[AnnotationRecord]; ok {
		t.Fatal("Record changed the chart it was given")
	}
	if recorded.Metadata.Annotations["team"] != "web" {
		t.Error("Record lost the chart's own annotations")
	}
	got, sequenced, err := Recorded(recorded.Metadata)
	if err != nil || !sequenced || !reflect.DeepEqual(got, charts) {
		t.Errorf("Recorded = %v, %v, %v; want %v, true, nil", got, sequenced, err, charts)
	}
	if _, sequenced, _ := Recorded(original.Metadata); sequenced {
		t.Error("a chart without the record reads as sequenced")
	}
	if _, _, err := Recorded(&chartv2.Metadata{Name: "x", Annotations: map[string]string{AnnotationRecord: "{"}}); err == nil {
		t.Error("a broken record reads without error")
	}
}
