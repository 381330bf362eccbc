// Command crd-dedupe removes repeated x-kubernetes-validations rules from
// generated CRDs. controller-gen applies the type-level markers of an
// upstream type embedded inline twice, so every CEL rule of such a type
// appears twice in our schema. Identical rules are harmless to the API
// server but cost CEL budget and obscure the diff against upstream.
//
// Usage: go run ./hack/crd-dedupe FILE...
package main

import (
	"bytes"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	for _, path := range os.Args[1:] {
		if err := dedupeFile(path); err != nil {
			fmt.Fprintf(os.Stderr, "crd-dedupe: %s: %v\n", path, err)
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
	removed := 0
	for i := range crd.Spec.Versions {
		if s := crd.Spec.Versions[i].Schema; s != nil && s.OpenAPIV3Schema != nil {
			removed += dedupe(s.OpenAPIV3Schema)
		}
	}
	if removed == 0 {
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
