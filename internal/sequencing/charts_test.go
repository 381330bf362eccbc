package sequencing

import (
	"errors"
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
			DependsOn:     []string{"db", "rabbitmq"},
			Dependencies:  map[string][]string{"db": nil, "rabbitmq": nil, "web": {"db", "rabbitmq"}},
			OrderDeclared: true,
		},
		"shop/db": {DependsOn: []string{"backup"}, Dependencies: map[string][]string{"backup": nil}, OrderDeclared: true},
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
	want := Charts{"shop": {DependsOn: []string{"db"}, Dependencies: map[string][]string{"db": nil}, OrderDeclared: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChartsOf = %+v, want %+v", got, want)
	}
}

// packagedShop is the shop chart's Chart.yaml as helm package writes it:
// the dependencies' depends-on is gone, the annotations are kept.
const packagedShop = `apiVersion: v2
name: shop
version: 1.0.0
annotations:
  helm.sh/depends-on/dependencies: '{"web": ["db", "queue"], "queue": ["db"]}'
dependencies:
- name: postgres
  alias: db
  version: 1.0.0
- name: rabbitmq
  alias: queue
  version: 1.0.0
- name: web
  version: 1.0.0
`

func TestChartsOfReadsTheSubchartOrderAnnotation(t *testing.T) {
	tests := []struct {
		name      string
		chartYAML string
		want      Charts
		wantErr   string
	}{{
		name:      "a packaged chart: the annotation alone",
		chartYAML: packagedShop,
		want: Charts{"shop": {
			Dependencies:  map[string][]string{"db": nil, "queue": {"db"}, "web": {"db", "queue"}},
			OrderDeclared: true,
		}},
	}, {
		name: "the raw depends-on field and the annotation add up",
		chartYAML: `name: shop
annotations:
  helm.sh/depends-on/dependencies: '{"web": ["queue"]}'
dependencies:
- name: postgres
  alias: db
- name: rabbitmq
  alias: queue
- name: web
  depends-on: [db]
`,
		want: Charts{"shop": {
			Dependencies:  map[string][]string{"db": nil, "queue": nil, "web": {"db", "queue"}},
			OrderDeclared: true,
		}},
	}, {
		name: "an empty helm.sh/depends-on/subcharts declares that no order is meant",
		chartYAML: `name: shop
annotations:
  helm.sh/depends-on/subcharts: '[]'
dependencies:
- name: web
`,
		want: Charts{"shop": {Dependencies: map[string][]string{"web": nil}, OrderDeclared: true}},
	}, {
		name:      "no word on the order: no facts",
		chartYAML: "name: shop\ndependencies:\n- name: web\n- name: db\n",
		want:      Charts{},
	}, {
		name:      "a name that is not a dependency",
		chartYAML: "name: shop\nannotations:\n  helm.sh/depends-on/dependencies: '{\"wbe\": [\"db\"]}'\ndependencies:\n- name: web\n- name: db\n",
		wantErr:   `"wbe" is not a dependency of the chart`,
	}, {
		name:      "not a JSON object of lists",
		chartYAML: "name: shop\nannotations:\n  helm.sh/depends-on/dependencies: '[\"db\"]'\ndependencies:\n- name: web\n",
		wantErr:   "want a JSON object of lists of names",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChartsOf(loadedChart("shop", tt.chartYAML))
			if tt.wantErr != "" {
				if err == nil || !contains(err.Error(), tt.wantErr) || !contains(err.Error(), AnnotationDependsOnDependencies) || !errors.Is(err, ErrInvalidOrder) {
					t.Fatalf("error = %v, want an invalid order naming %s and containing %q", err, AnnotationDependsOnDependencies, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ChartsOf\n got: %+v\nwant: %+v", got, tt.want)
			}
		})
	}
}
