package drift

import (
	"errors"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
)

func TestIgnoreRules(t *testing.T) {
	tests := []struct {
		name    string
		rules   []helmv2.IgnoreRule
		wantErr string // substring; empty means valid
	}{
		{name: "no rules"},
		{name: "path", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}}},
		{name: "whole object", rules: []helmv2.IgnoreRule{{Paths: []string{""}}}},
		{name: "escaped key", rules: []helmv2.IgnoreRule{{Paths: []string{"/metadata/annotations/helm.toolkit.fluxcd.io~1driftDetection", "/a~0b"}}}},
		{name: "target with regular expressions", rules: []helmv2.IgnoreRule{{
			Paths:  []string{"/spec/replicas"},
			Target: &kustomize.Selector{Group: "apps", Kind: "(Deployment|StatefulSet)", Name: "podinfo.*", LabelSelector: "app in (a, b)"},
		}}},
		{name: "missing leading slash", rules: []helmv2.IgnoreRule{{Paths: []string{"spec/replicas"}}},
			wantErr: `spec.driftDetection.ignore[0]: path "spec/replicas": a JSON pointer must be empty or start with "/"`},
		{name: "bad escape", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}, {Paths: []string{"/metadata/labels/a~2b"}}},
			wantErr: `spec.driftDetection.ignore[1]: path "/metadata/labels/a~2b"`},
		{name: "trailing tilde", rules: []helmv2.IgnoreRule{{Paths: []string{"/a~"}}}, wantErr: `"~" must be written "~0"`},
		{name: "no paths", rules: []helmv2.IgnoreRule{{}}, wantErr: "paths is empty"},
		{name: "bad kind regular expression", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec"}, Target: &kustomize.Selector{Kind: "Deploy(ment"}}},
			wantErr: "target: invalid kind regex"},
		{name: "bad label selector", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec"}, Target: &kustomize.Selector{LabelSelector: "a in ("}}},
			wantErr: "target:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IgnoreRules(tt.rules)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if len(got) != len(tt.rules) {
					t.Fatalf("%d rules converted, want %d", len(got), len(tt.rules))
				}
				for i, r := range tt.rules {
					if strings.Join(got[i].Paths, ",") != strings.Join(r.Paths, ",") || (r.Target == nil) != (got[i].Selector == nil) {
						t.Errorf("rule %d converted to %+v", i, got[i])
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalidIgnoreRule) {
				t.Errorf("error %v does not wrap ErrInvalidIgnoreRule", err)
			}
		})
	}
}

func TestIgnoreRulesTargetCarriesEveryField(t *testing.T) {
	target := &kustomize.Selector{Group: "g", Version: "v", Kind: "k", Name: "n", Namespace: "ns",
		AnnotationSelector: "a=b", LabelSelector: "c=d"}
	got, err := IgnoreRules([]helmv2.IgnoreRule{{Paths: []string{"/x"}, Target: target}})
	if err != nil {
		t.Fatal(err)
	}
	s := got[0].Selector
	if s.Group != "g" || s.Version != "v" || s.Kind != "k" || s.Name != "n" || s.Namespace != "ns" ||
		s.AnnotationSelector != "a=b" || s.LabelSelector != "c=d" {
		t.Errorf("selector %+v", s)
	}
}
