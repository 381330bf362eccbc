package drift

import (
	"errors"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/ssa/jsondiff"
)

// ErrInvalidIgnoreRule marks a spec.driftDetection.ignore rule that cannot be
// used; retrying will not help until the spec changes.
var ErrInvalidIgnoreRule = errors.New("invalid drift detection ignore rule")

// IgnoreRules turns the ignore rules of a HelmRelease into the form of the
// ssa library, checking each of them first. Checking up front matters:
// the library only notices a bad JSON pointer or selector half-way through
// a diff, after other objects were already compared.
func IgnoreRules(rules []helmv2.IgnoreRule) ([]jsondiff.IgnoreRule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	out := make([]jsondiff.IgnoreRule, 0, len(rules))
	var errs []error
	for i, rule := range rules {
		converted, err := ignoreRule(rule)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.driftDetection.ignore[%d]: %w", i, err))
			continue
		}
		out = append(out, converted)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidIgnoreRule, errors.Join(errs...))
	}
	return out, nil
}

func ignoreRule(rule helmv2.IgnoreRule) (jsondiff.IgnoreRule, error) {
	if len(rule.Paths) == 0 {
		return jsondiff.IgnoreRule{}, errors.New("paths is empty")
	}
	for _, p := range rule.Paths {
		if err := checkPointer(p); err != nil {
			return jsondiff.IgnoreRule{}, fmt.Errorf("path %q: %w", p, err)
		}
	}
	converted := jsondiff.IgnoreRule{Paths: rule.Paths}
	if t := rule.Target; t != nil {
		converted.Selector = &jsondiff.Selector{
			Group:              t.Group,
			Version:            t.Version,
			Kind:               t.Kind,
			Name:               t.Name,
			Namespace:          t.Namespace,
			AnnotationSelector: t.AnnotationSelector,
			LabelSelector:      t.LabelSelector,
		}
		// Compiling catches bad regular expressions and label selector
		// expressions in the target.
		if _, err := jsondiff.NewSelectorRegex(converted.Selector); err != nil {
			return jsondiff.IgnoreRule{}, fmt.Errorf("target: %w", err)
		}
	}
	return converted, nil
}

// checkPointer tells whether p is a JSON pointer as RFC 6901 defines it:
// empty (the whole object) or "/"-separated tokens in which "~" only
// appears as the escapes "~0" and "~1".
func checkPointer(p string) error {
	if p == jsondiff.IgnorePathRoot {
		return nil
	}
	if !strings.HasPrefix(p, "/") {
		return errors.New(`a JSON pointer must be empty or start with "/" (e.g. /spec/replicas)`)
	}
	for i := 0; i < len(p); i++ {
		if p[i] != '~' {
			continue
		}
		if i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1') {
			return errors.New(`"~" must be written "~0", and "/" inside a key "~1"`)
		}
	}
	return nil
}
