package sequencing

import (
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// loadedChart is a chart as the loader leaves it: metadata parsed (unknown
// fields gone) and the raw Chart.yaml kept.
func loadedChart(name, chartYAML string, deps ...*chartv2.Chart) *chartv2.Chart {
	c := &chartv2.Chart{
		Metadata: &chartv2.Metadata{Name: name, Version: "1.0.0", APIVersion: "v2"},
		Raw:      []*common.File{{Name: "Chart.yaml", Data: []byte(chartYAML)}},
	}
	c.SetDependencies(deps...)
	return c
}

func TestChartsOf(t *testing.T) {
	backup := loadedChart("backup", "name: backup\n")
	db := loadedChart("postgres", `name: postgres
annotations:
  helm.sh/depends-on/subcharts: '["backup"]'
dependencies:
- name: backup
  version: 1.0.0
`, backup)
	queue := loadedChart("rabbitmq", "name: rabbitmq\n")
	shop := loadedChart("shop", `name: shop
annotations:
  helm.sh/depends-on/subcharts: '["db", "rabbitmq"]'
dependencies:
- name: postgres
  alias: db
  version: 1.0.0
- name: rabbitmq
  version: 1.0.0
- name: web
  version: 1.0.0
  depends-on: [db, rabbitmq]
`, db, queue)

	got, err := ChartsOf(shop)
	if err != nil {
		t.Fatal(err)
	}
	want := Charts{
		"shop": {
			DependsOn:    []string{"db", "rabbitmq"},
			Dependencies: map[string][]string{"db": nil, "rabbitmq": nil, "web": {"db", "rabbitmq"}},
		},
		"shop/db": {DependsOn: []string{"backup"}, Dependencies: map[string][]string{"backup": nil}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChartsOf\n got: %+v\nwant: %+v", got, want)
	}
}

func TestChartsOfRefusesABrokenAnnotation(t *testing.T) {
	c := loadedChart("shop", "name: shop\nannotations:\n  helm.sh/depends-on/subcharts: db\n")
	_, err := ChartsOf(c)
	if err == nil || !contains(err.Error(), AnnotationDependsOnSubcharts) || !contains(err.Error(), "chart shop") {
		t.Fatalf("error = %v, want it to name the chart and the annotation", err)
	}
}

func TestChartsOfWithoutRawFallsBackToMetadata(t *testing.T) {
	c := &chartv2.Chart{Metadata: &chartv2.Metadata{
		Name: "shop", Annotations: map[string]string{AnnotationDependsOnSubcharts: `["db"]`},
		Dependencies: []*chartv2.Dependency{{Name: "postgres", Alias: "db"}},
	}}
	got, err := ChartsOf(c)
	if err != nil {
		t.Fatal(err)
	}
	want := Charts{"shop": {DependsOn: []string{"db"}, Dependencies: map[string][]string{"db": nil}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChartsOf = %+v, want %+v", got, want)
	}
}
