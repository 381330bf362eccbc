package drift

import (
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/ssa/jsondiff"
)

// Rules are the spec.driftDetection.ignore rules of a HelmRelease in the two
// forms the Checker needs.
//
// Upstream helm-controller hands every rule to the diff library as written
// and validates nothing. The library removes each path from both sides of
// the comparison with a JSON patch "remove" that tolerates missing paths,
// which gives paths that are not JSON pointers a meaning of their own: a
// path without "/" removes nothing, and in any other path the part before
// the first "/" is dropped ("spec/replicas" removes the top-level key
// "replicas"). Detection here uses the same library with the same paths,
// so a rule ignores exactly what it ignores upstream.
type Rules struct {
	// Detect are the rules as written.
	Detect []jsondiff.IgnoreRule
	// Correct are the rules with every path as the JSON pointer (RFC 6901)
	// that detection acted on, leaving out paths that ignore nothing. The
	// correction looks paths up as strict JSON pointers; given a path that
	// is not one, it would fail instead of keeping the field, while
	// upstream's correction keeps it.
	Correct []jsondiff.IgnoreRule
}

// IgnoreRules converts the ignore rules of a HelmRelease. It never refuses
// a rule, as upstream does not: warnings names each rule that does not do
// what it reads as, and says what it does instead. A target that does not
// compile makes every drift detection of the release fail, as upstream's
// does, rather than ignore its paths on some other objects or none.
func IgnoreRules(rules []helmv2.IgnoreRule) (out Rules, warnings []string) {
	for i, rule := range rules {
		field := fmt.Sprintf("spec.driftDetection.ignore[%d]", i)
		detect := jsondiff.IgnoreRule{Paths: rule.Paths, Selector: selector(rule.Target)}
		if detect.Selector != nil {
			if _, err := jsondiff.NewSelectorRegex(detect.Selector); err != nil {
				warnings = append(warnings, fmt.Sprintf("%s.target: %v; drift detection fails until the rule is fixed, as in upstream helm-controller", field, err))
			}
		}
		if len(rule.Paths) == 0 {
			warnings = append(warnings, field+".paths is empty: the rule ignores nothing")
		}
		correct := jsondiff.IgnoreRule{Selector: detect.Selector}
		for _, p := range rule.Paths {
			pointer, acts := effectivePointer(p)
			switch {
			case !acts:
				warnings = append(warnings, fmt.Sprintf(`%s: path %q is not a JSON pointer (e.g. "/spec/replicas") and ignores nothing`, field, p))
				continue
			case pointer != p:
				warnings = append(warnings, fmt.Sprintf(`%s: path %q is not a JSON pointer (e.g. "/spec/replicas"); it is read as %q`, field, p, pointer))
			}
			correct.Paths = append(correct.Paths, pointer)
		}
		out.Detect = append(out.Detect, detect)
		if len(correct.Paths) > 0 {
			out.Correct = append(out.Correct, correct)
		}
	}
	return out, warnings
}

func selector(t *kustomize.Selector) *jsondiff.Selector {
	if t == nil {
		return nil
	}
	return &jsondiff.Selector{
		Group:              t.Group,
		Version:            t.Version,
		Kind:               t.Kind,
		Name:               t.Name,
		Namespace:          t.Namespace,
		AnnotationSelector: t.AnnotationSelector,
		LabelSelector:      t.LabelSelector,
	}
}

// effectivePointer returns the JSON pointer of what the diff library
// removes for path p, and false when it removes nothing. The library's JSON
// patch splits a path at every "/", skips the first part whatever it holds
// (empty in a JSON pointer) and unescapes "~1" and "~0" in the others,
// leaving any other "~" as it is; a non-empty path without "/" matches
// nothing. A JSON pointer comes back unchanged.
func effectivePointer(p string) (string, bool) {
	if p == jsondiff.IgnorePathRoot {
		return p, true
	}
	parts := strings.Split(p, "/")
	if len(parts) < 2 {
		return "", false
	}
	var b strings.Builder
	for _, part := range parts[1:] {
		b.WriteString("/")
		b.WriteString(escape.Replace(unescape.Replace(part)))
	}
	return b.String(), true
}

var (
	unescape = strings.NewReplacer("~1", "/", "~0", "~")
	escape   = strings.NewReplacer("~", "~0", "/", "~1")
)
