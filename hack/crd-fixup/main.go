// Command crd-fixup corrects two artefacts of generating our CRD from
// types that embed upstream's inline:
//
//   - controller-gen applies the type-level markers of an embedded
//     upstream type twice, so every CEL rule of such a type appears twice
//     in our schema. Identical rules are harmless to the API server but
//     cost CEL budget and obscure the diff against upstream; the repeats
//     are removed.
//   - Where our field shadows an upstream field of the same JSON name,
//     controller-gen merges the two schemas and intersects their enums, so
//     a value only we accept is lost. widened lists those values; they are
//     put back.
//   - Where our field shadows an upstream list of the same JSON name with
//     items of another type, controller-gen cannot merge the two item
//     schemas and lists both under allOf, so an entry must satisfy both
//     and the API server prunes nothing but also documents nothing of
//     ours. replacedItems lists those lists; our item schema, the one
//     whose properties include all of upstream's, replaces the allOf.
//
// Usage: go run ./hack/crd-fixup FILE...
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// widened are the enum values our types add to upstream's, by schema path
// below the version's root.
var widened = map[string][]string{
	"spec.waitStrategy.name": {string(v2.WaitStrategyOrdered)},
}

// replacedItems are the lists, by schema path below the version's root,
// whose item type ours replaces with a wider one.
var replacedItems = []string{"spec.dependsOn"}

func main() {
	for _, path := range os.Args[1:] {
		if err := dedupeFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crd-fixup: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func dedupeFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(bytes.TrimPrefix(data, []byte("---\n")), &crd); err != nil {
		return fmt.Errorf("parsing CRD: %w", err)
	}
	changed := 0
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			changed += dedupe(s.OpenAPIV3Schema)
			changed += widen(s.OpenAPIV3Schema)
			n, err := replaceItems(s.OpenAPIV3Schema)
			if err != nil {
				return err
			}
			changed += n
		}
	}
	if changed == 0 {
		return nil
	}
	out, err := yaml.Marshal(stripGenerated(crd))
	if err != nil {
		return fmt.Errorf("writing CRD: %w", err)
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// dedupe removes repeated rules in s and below, returning how many it removed.
func dedupe(s *apiextensionsv1.JSONSchemaProps) int {
	removed := 0
	if len(s.XValidations) > 1 {
		seen := map[string]bool{}
		kept := s.XValidations[:0]
		for _, rule := range s.XValidations {
			key := rule.Rule + "\x00" + rule.Message + "\x00" + rule.MessageExpression + "\x00" + rule.FieldPath
			if seen[key] {
				removed++
				continue
			}
			seen[key] = true
			kept = append(kept, rule)
		}
		s.XValidations = kept
	}
	for name, p := range s.Properties {
		removed += dedupe(&p)
		s.Properties[name] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		removed += dedupe(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		removed += dedupe(s.AdditionalProperties.Schema)
	}
	return removed
}

// schemaAt is a copy of the schema at the dotted property path under
// root, or nil when the path is not in it; setPath writes a copy back.
func schemaAt(root *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	s := root
	for _, name := range strings.Split(path, ".") {
		p, ok := s.Properties[name]
		if !ok {
			return nil
		}
		s = &p
	}
	return s
}

// widen adds the values of widened to the enums they belong to, returning
// how many it added. A path that is not in the schema is left alone: the
// CRD test (api/v2) fails if a documented widening is missing.
func widen(root *apiextensionsv1.JSONSchemaProps) int {
	added := 0
	for path, values := range widened {
		s := schemaAt(root, path)
		if s == nil || len(s.Enum) == 0 {
			continue
		}
		for _, v := range values {
			raw, _ := json.Marshal(v)
			if slices.ContainsFunc(s.Enum, func(e apiextensionsv1.JSON) bool { return bytes.Equal(e.Raw, raw) }) {
				continue
			}
			s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: raw})
			added++
		}
		setPath(root, strings.Split(path, "."), *s)
	}
	return added
}

// replaceItems turns the allOf controller-gen writes for each path of
// replacedItems into the one item schema that holds every property of the
// others (ours, which adds to upstream's), returning how many it replaced.
// An allOf without such a schema is an error: the types no longer extend
// each other and must be looked at.
func replaceItems(root *apiextensionsv1.JSONSchemaProps) (int, error) {
	replaced := 0
	for _, path := range replacedItems {
		s := schemaAt(root, path)
		if s == nil || len(s.AllOf) == 0 {
			continue
		}
		var widest *apiextensionsv1.JSONSchemaProps
		for i := range s.AllOf {
			branch := &s.AllOf[i]
			if branch.Items == nil || branch.Items.Schema == nil {
				return 0, fmt.Errorf("%s: allOf branch %d has no item schema", path, i)
			}
			if widest == nil || len(branch.Items.Schema.Properties) > len(widest.Properties) {
				widest = branch.Items.Schema
			}
		}
		for i := range s.AllOf {
			for name := range s.AllOf[i].Items.Schema.Properties {
				if _, ok := widest.Properties[name]; !ok {
					return 0, fmt.Errorf("%s: no item schema of allOf holds every property (%q is missing from the widest)", path, name)
				}
			}
		}
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: widest}
		s.AllOf = nil
		setPath(root, strings.Split(path, "."), *s)
		replaced++
	}
	return replaced, nil
}

// setPath stores s at path below root; Properties holds values, not
// pointers, so a change must be written back level by level.
func setPath(root *apiextensionsv1.JSONSchemaProps, path []string, s apiextensionsv1.JSONSchemaProps) {
	if len(path) == 1 {
		root.Properties[path[0]] = s
		return
	}
	child := root.Properties[path[0]]
	setPath(&child, path[1:], s)
	root.Properties[path[0]] = child
}

// crdWithoutStatus mirrors what controller-gen writes: no status, no
// creationTimestamp.
type crdWithoutStatus struct {
	APIVersion string                                       `json:"apiVersion"`
	Kind       string                                       `json:"kind"`
	Metadata   crdMetadata                                  `json:"metadata"`
	Spec       apiextensionsv1.CustomResourceDefinitionSpec `json:"spec"`
}

type crdMetadata struct {
	Name        string            `json:"name"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

func stripGenerated(crd apiextensionsv1.CustomResourceDefinition) crdWithoutStatus {
	return crdWithoutStatus{
		APIVersion: crd.APIVersion,
		Kind:       crd.Kind,
		Metadata:   crdMetadata{Name: crd.Name, Annotations: crd.Annotations, Labels: crd.Labels},
		Spec:       crd.Spec,
	}
}
