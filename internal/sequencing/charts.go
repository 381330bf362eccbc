package sequencing

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"sigs.k8s.io/yaml"
)

// chartFile is the part of a raw Chart.yaml sequencing reads. Helm's chart
// loader drops fields it does not know, such as a dependency's depends-on,
// so they are read from the file itself.
type chartFile struct {
	Annotations  map[string]any    `json:"annotations"`
	Dependencies []chartDependency `json:"dependencies"`
}

type chartDependency struct {
	Name      string   `json:"name"`
	Alias     string   `json:"alias"`
	DependsOn []string `json:"depends-on"`
}

// key is the name the dependency's subchart renders under.
func (d chartDependency) key() string {
	if d.Alias != "" {
		return d.Alias
	}
	return d.Name
}

// ChartsOf reads the sequencing facts of a loaded chart and of every
// subchart it carries, keyed by chart path (the root chart's name, then
// each dependency's alias or name). Charts without facts are left out.
func ChartsOf(chrt *chartv2.Chart) (Charts, error) {
	out := Charts{}
	if chrt == nil || chrt.Metadata == nil {
		return out, nil
	}
	return out, collectCharts(chrt, chrt.Name(), out)
}

func collectCharts(chrt *chartv2.Chart, path string, out Charts) error {
	file, err := readChartFile(chrt)
	if err != nil {
		return invalidOrder(fmt.Errorf("chart %s: Chart.yaml: %w", path, err))
	}
	facts, err := file.facts()
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	if facts.OrderDeclared {
		out[path] = facts
	}
	for _, dep := range file.Dependencies {
		sub := subchart(chrt, dep.Name)
		if sub == nil {
			continue
		}
		if err := collectCharts(sub, path+"/"+dep.key(), out); err != nil {
			return err
		}
	}
	return nil
}

// facts reads the subchart order of one Chart.yaml: the annotations, and
// the depends-on fields where the file still has them. A dependency named
// in both places needs what either names.
func (file chartFile) facts() (Chart, error) {
	facts := Chart{}
	if raw, ok := file.Annotations[AnnotationDependsOnSubcharts]; ok {
		names, err := nameListValue(raw)
		if err != nil {
			return facts, invalidOrder(fmt.Errorf("annotation %s: %w", AnnotationDependsOnSubcharts, err))
		}
		facts.DependsOn, facts.OrderDeclared = names, true
	}
	byAnnotation := map[string][]string{}
	if raw, ok := file.Annotations[AnnotationDependsOnDependencies]; ok {
		var err error
		if byAnnotation, err = dependencyMapValue(raw); err != nil {
			return facts, invalidOrder(fmt.Errorf("annotation %s: %w", AnnotationDependsOnDependencies, err))
		}
		facts.OrderDeclared = true
	}
	for _, dep := range file.Dependencies {
		if facts.Dependencies == nil {
			facts.Dependencies = map[string][]string{}
		}
		needs := dep.DependsOn
		if extra, ok := byAnnotation[dep.key()]; ok {
			needs = append(slices.Clone(needs), extra...)
			slices.Sort(needs)
			needs = slices.Compact(needs)
		}
		facts.Dependencies[dep.key()] = needs
		if len(dep.DependsOn) > 0 {
			facts.OrderDeclared = true
		}
	}
	for name := range byAnnotation {
		if _, declared := facts.Dependencies[name]; !declared {
			return facts, &orderError{fmt.Sprintf("annotation %s: %q is not a dependency of the chart", AnnotationDependsOnDependencies, name)}
		}
	}
	return facts, nil
}

func subchart(chrt *chartv2.Chart, name string) *chartv2.Chart {
	for _, sub := range chrt.Dependencies() {
		if sub.Metadata != nil && sub.Metadata.Name == name {
			return sub
		}
	}
	return nil
}

// readChartFile parses the chart's raw Chart.yaml, or falls back to its
// loaded metadata when the raw file is not there (a chart read back from a
// release record).
func readChartFile(chrt *chartv2.Chart) (chartFile, error) {
	var file chartFile
	for _, f := range chrt.Raw {
		if f != nil && f.Name == "Chart.yaml" {
			return file, yaml.Unmarshal(f.Data, &file)
		}
	}
	if chrt.Metadata == nil {
		return file, nil
	}
	file.Annotations = map[string]any{}
	for k, v := range chrt.Metadata.Annotations {
		file.Annotations[k] = v
	}
	for _, d := range chrt.Metadata.Dependencies {
		if d == nil {
			continue
		}
		file.Dependencies = append(file.Dependencies, chartDependency{Name: d.Name, Alias: d.Alias})
	}
	return file, nil
}

// nameListValue reads an annotation that Chart.yaml may hold as a string
// with a JSON list in it (annotations are strings for Helm) or, leniently,
// as a YAML list.
func nameListValue(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return ParseNameList(v)
	case []any:
		raw, _ := json.Marshal(v)
		return ParseNameList(string(raw))
	default:
		return nil, &orderError{fmt.Sprintf("want a JSON list of names, got %v", v)}
	}
}

// dependencyMapValue reads the helm.sh/depends-on/dependencies annotation:
// a JSON object from dependency names to JSON lists of names, such as
// {"api": ["db", "queue"]}.
func dependencyMapValue(v any) (map[string][]string, error) {
	raw, ok := v.(string)
	if !ok {
		return nil, &orderError{fmt.Sprintf("want a string holding a JSON object such as '{\"api\": [\"db\"]}', got %v", v)}
	}
	var lists map[string][]string
	if err := json.Unmarshal([]byte(raw), &lists); err != nil {
		return nil, &orderError{fmt.Sprintf("want a JSON object of lists of names such as {\"api\": [\"db\"]}, got: %s", raw)}
	}
	out := make(map[string][]string, len(lists))
	for name, deps := range lists {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, &orderError{fmt.Sprintf("an empty dependency name in %s", raw)}
		}
		var kept []string
		for _, d := range deps {
			if d = strings.TrimSpace(d); d != "" && !slices.Contains(kept, d) {
				kept = append(kept, d)
			}
		}
		out[name] = kept
	}
	return out, nil
}
