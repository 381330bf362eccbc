package drift

import (
	"reflect"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestIgnoreRules(t *testing.T) {
	tests := []struct {
		name  string
		rules []helmv2.IgnoreRule
		// correct is the paths of each rule the correction gets, "|"
		// between rules; detection always gets the rules as written.
		correct string
		// warnings are substrings, one per expected warning.
		warnings []string
	}{
		{name: "no rules"},
		{name: "path", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}}, correct: "/spec/replicas"},
		{name: "whole object", rules: []helmv2.IgnoreRule{{Paths: []string{""}}}, correct: ""},
		{name: "escaped keys", rules: []helmv2.IgnoreRule{{Paths: []string{"/metadata/annotations/helm.toolkit.fluxcd.io~1driftDetection", "/a~0b"}}},
			correct: "/metadata/annotations/helm.toolkit.fluxcd.io~1driftDetection,/a~0b"},
		{name: "target with regular expressions", correct: "/spec/replicas", rules: []helmv2.IgnoreRule{{
			Paths:  []string{"/spec/replicas"},
			Target: &kustomize.Selector{Group: "apps", Kind: "(Deployment|StatefulSet)", Name: "podinfo.*", LabelSelector: "app in (a, b)"},
		}}},
		{name: "dotted path ignores nothing", rules: []helmv2.IgnoreRule{{Paths: []string{"spec.replicas"}}, {Paths: []string{"/spec/paused"}}},
			correct:  "/spec/paused",
			warnings: []string{`spec.driftDetection.ignore[0]: path "spec.replicas" is not a JSON pointer (e.g. "/spec/replicas") and ignores nothing`}},
		{name: "missing leading slash drops the first key", rules: []helmv2.IgnoreRule{{Paths: []string{"spec/replicas", "x/spec/replicas"}}},
			correct: "/replicas,/spec/replicas",
			warnings: []string{
				`spec.driftDetection.ignore[0]: path "spec/replicas" is not a JSON pointer (e.g. "/spec/replicas"); it is read as "/replicas"`,
				`path "x/spec/replicas" is not a JSON pointer (e.g. "/spec/replicas"); it is read as "/spec/replicas"`,
			}},
		{name: "tilde that escapes nothing is a key character", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}, {Paths: []string{"/metadata/labels/a~2b", "/a~"}}},
			correct: "/spec/replicas|/metadata/labels/a~02b,/a~0",
			warnings: []string{
				`spec.driftDetection.ignore[1]: path "/metadata/labels/a~2b" is not a JSON pointer (e.g. "/spec/replicas"); it is read as "/metadata/labels/a~02b"`,
				`path "/a~" is not a JSON pointer`,
			}},
		{name: "no paths", rules: []helmv2.IgnoreRule{{}}, warnings: []string{"spec.driftDetection.ignore[0].paths is empty: the rule ignores nothing"}},
		{name: "bad kind regular expression", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec"}, Target: &kustomize.Selector{Kind: "Deploy(ment"}}},
			correct:  "/spec",
			warnings: []string{"spec.driftDetection.ignore[0].target: invalid kind regex"}},
		{name: "bad label selector", rules: []helmv2.IgnoreRule{{Paths: []string{"/spec"}, Target: &kustomize.Selector{LabelSelector: "a in ("}}},
			correct: "/spec", warnings: []string{"spec.driftDetection.ignore[0].target:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings := IgnoreRules(tt.rules)
			if len(got.Detect) != len(tt.rules) {
				t.Fatalf("%d rules for detection, want %d", len(got.Detect), len(tt.rules))
			}
			for i, r := range tt.rules {
				if strings.Join(got.Detect[i].Paths, ",") != strings.Join(r.Paths, ",") || (r.Target == nil) != (got.Detect[i].Selector == nil) {
					t.Errorf("rule %d for detection is %+v, want it as written", i, got.Detect[i])
				}
			}
			var correct []string
			for _, r := range got.Correct {
				correct = append(correct, strings.Join(r.Paths, ","))
			}
			if strings.Join(correct, "|") != tt.correct {
				t.Errorf("paths for the correction %q, want %q", strings.Join(correct, "|"), tt.correct)
			}
			if len(warnings) != len(tt.warnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(tt.warnings))
			}
			for i, want := range tt.warnings {
				if !strings.Contains(warnings[i], want) {
					t.Errorf("warning %q does not contain %q", warnings[i], want)
				}
			}
		})
	}
}

func TestIgnoreRulesTargetCarriesEveryField(t *testing.T) {
	target := &kustomize.Selector{Group: "g", Version: "v", Kind: "k", Name: "n", Namespace: "ns",
		AnnotationSelector: "a=b", LabelSelector: "c=d"}
	got, warnings := IgnoreRules([]helmv2.IgnoreRule{{Paths: []string{"/x"}, Target: target}})
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	if sel := got.Detect[0].Selector; sel.Group != "g" || sel.Version != "v" || sel.Kind != "k" || sel.Name != "n" || sel.Namespace != "ns" ||
		sel.AnnotationSelector != "a=b" || sel.LabelSelector != "c=d" {
		t.Errorf("selector %+v", sel)
	}
	if got.Correct[0].Selector != got.Detect[0].Selector {
		t.Error("detection and correction select different objects")
	}
}

// TestEffectivePointerRemovesWhatTheDiffRemoves holds effectivePointer to
// the diff library: removing a path as written and removing its effective
// pointer must leave the same object, and a path that acts on nothing must
// leave it unchanged.
func TestEffectivePointerRemovesWhatTheDiffRemoves(t *testing.T) {
	doc := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Thing",
			"replicas": int64(1),
			"a~b":      "x", "a~2b": "x", "a~": "x", "x/y": "x", "": "empty key",
			"metadata": map[string]any{"name": "n", "labels": map[string]any{"a~2b": "x", "c": "d"}},
			"spec":     map[string]any{"replicas": int64(3), "x/y": "z", "list": []any{"a", "b"}},
		}}
	}
	paths := []string{"/spec/replicas", "spec.replicas", "spec/replicas", "x/spec/replicas", ".spec.replicas",
		"/a~b", "/a~2b", "/a~", "/metadata/labels/a~2b", "/spec/x~1y", "/x~1y", "/", "//", "/spec/list/1", "/spec/list/x"}
	for _, p := range paths {
		t.Run(p, func(t *testing.T) {
			asWritten := doc()
			errWritten := jsondiff.ApplyPatchToUnstructured(asWritten, jsondiff.GenerateRemovePatch(p))
			pointer, acts := effectivePointer(p)
			if !acts {
				if errWritten != nil || !reflect.DeepEqual(asWritten.Object, doc().Object) {
					t.Fatalf("%q is said to remove nothing, the diff library made %v (error %v)", p, asWritten.Object, errWritten)
				}
				return
			}
			if !isJSONPointer(pointer) {
				t.Fatalf("effective pointer %q of %q is not a JSON pointer", pointer, p)
			}
			effective := doc()
			errEffective := jsondiff.ApplyPatchToUnstructured(effective, jsondiff.GenerateRemovePatch(pointer))
			if (errWritten == nil) != (errEffective == nil) {
				t.Fatalf("removing %q: error %v; removing %q: error %v", p, errWritten, pointer, errEffective)
			}
			if !reflect.DeepEqual(asWritten.Object, effective.Object) {
				t.Errorf("removing %q left %v; removing %q left %v", p, asWritten.Object, pointer, effective.Object)
			}
		})
	}
}

// isJSONPointer: "/"-separated tokens in which "~" only starts "~0" or "~1"
// (RFC 6901).
func isJSONPointer(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}
