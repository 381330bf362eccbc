package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	runtimecel "github.com/fluxcd/pkg/runtime/cel"
	celgo "github.com/google/cel-go/cel"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Names of the variables a readyExpr sees: the HelmRelease being reconciled
// and the dependency under evaluation.
const (
	readyExprSelfVar = "self"
	readyExprDepVar  = "dep"
)

// dependencyOptions are the controller-wide settings that change how
// spec.dependsOn is checked.
type dependencyOptions struct {
	// NoCrossNamespaceRefs mirrors --no-cross-namespace-refs. Upstream
	// checks dependencies in other namespaces all the same, and so does
	// this controller: each one is announced through Warn.
	NoCrossNamespaceRefs bool
	// Warn, when set, hears about entries that work, but not as the
	// controller's settings suggest.
	Warn func(msg string)

	// AdditiveCEL mirrors the AdditiveCELDependencyCheck feature gate. When
	// false (the default), a readyExpr replaces the built-in readiness check;
	// when true, a dependency with a readyExpr must pass both.
	AdditiveCEL bool

	// Typed gives the access entries with a kind are read through. It is
	// called once, and only when such an entry is there, since building it
	// may cost a connection to a remote cluster.
	Typed func(context.Context) (*typedAccess, error)
}

// typedAccess reads the objects that entries with a kind name, with the
// identity the release is applied as: what a tenant may not read, its
// release may not wait for either, or dependsOn would tell it about
// objects its ServiceAccount cannot see.
type typedAccess struct {
	// Mapper resolves apiVersion and kind to a resource and its scope.
	Mapper apimeta.RESTMapper
	// Reader gets objects as unstructured or as their metadata only.
	Reader client.Reader
	// Identity names who reads, in messages ("the controller's
	// identity", "ServiceAccount 'team/deployer'", ...).
	Identity string
}

// NotReadyDependency is one dependency that keeps a HelmRelease waiting.
type NotReadyDependency struct {
	// Key is the namespace and name of the dependency.
	Key client.ObjectKey
	// Ref, for an entry with a kind, names it as
	// apiVersion/Kind/namespace/name (apiVersion/Kind/name when it is
	// cluster-scoped); empty for a HelmRelease, named by Key as upstream
	// names it.
	Ref string
	// NotFound is true when the dependency does not exist.
	NotFound bool
	// Reason says why an existing dependency is not ready.
	Reason string
}

func (d NotReadyDependency) String() string {
	name := d.Ref
	if name == "" {
		name = d.Key.String()
	}
	if d.NotFound {
		return fmt.Sprintf("dependency '%s' not found", name)
	}
	return fmt.Sprintf("dependency '%s' is not ready: %s", name, d.Reason)
}

// DependencyNotReadyError reports that one or more dependencies are missing
// or not ready yet. Waiting can fix it: the caller should mark the
// HelmRelease DependencyNotReady and check again later.
type DependencyNotReadyError struct {
	// Dependencies lists every dependency that is not ready, in the order of
	// spec.dependsOn.
	Dependencies []NotReadyDependency
}

// Error names each dependency that is not ready and why, separated by "; ".
func (e *DependencyNotReadyError) Error() string {
	msgs := make([]string, 0, len(e.Dependencies))
	for _, d := range e.Dependencies {
		msgs = append(msgs, d.String())
	}
	return strings.Join(msgs, "; ")
}

// InvalidDependencyError reports a spec.dependsOn that can never be satisfied
// as written: a dependency on the HelmRelease itself that the built-in check
// judges, a missing name, or a readyExpr that is not a valid boolean CEL
// expression. Waiting does not fix it; the spec (or
// the controller's flags) must change.
type InvalidDependencyError struct {
	// Problems holds one actionable message per invalid entry.
	Problems []string
	// InvalidCEL is true when a readyExpr does not compile (or does not
	// yield a bool).
	InvalidCEL bool
}

func (e *InvalidDependencyError) Error() string {
	return "invalid spec.dependsOn: " + strings.Join(e.Problems, "; ")
}

// checkDependencies reports whether every HelmRelease listed in
// obj.Spec.DependsOn is ready. It returns nil when they all are, an
// *InvalidDependencyError when an entry is invalid (checked for all entries
// before any dependency is fetched), a *DependencyNotReadyError naming every
// dependency that is missing or not ready, and a plain error when reading a
// dependency fails for another reason than it not existing.
//
// A dependency is ready by the built-in check when it exists, its
// status.observedGeneration equals its metadata.generation and its Ready
// condition is True. A dependency with a readyExpr is ready when the
// expression evaluates to true, with `self` bound to obj and `dep` to the
// dependency (both as their JSON form); the built-in check is then skipped,
// unless opts.AdditiveCEL is set, in which case both must pass.
//
// An expression that compiles but fails to evaluate (typically "no such key"
// because the dependency has no status yet) makes the dependency not ready,
// with the evaluation error in the message, rather than being an invalid
// spec: the missing field usually appears once the dependency has been
// reconciled, and upstream helm-controller retries in this case too. Only
// expressions that do not compile, or do not yield a bool, are invalid.
func checkDependencies(ctx context.Context, c client.Reader, obj *v2.HelmRelease, opts dependencyOptions) error {
	refs := obj.Spec.DependsOn
	if len(refs) == 0 {
		return nil
	}

	// Validate every entry first, so that a configuration error is reported
	// at once instead of being hidden behind a dependency that is not ready.
	keys, exprs, err := validateDependencies(obj, opts)
	if err != nil {
		return err
	}

	typed, err := resolveTypedDependencies(ctx, obj, keys, opts)
	if err != nil {
		return err
	}

	var self map[string]any
	selfMap := func() (map[string]any, error) {
		if self == nil {
			m, err := helmReleaseToMap(obj)
			if err != nil {
				return nil, err
			}
			self = m
		}
		return self, nil
	}
	var notReady []NotReadyDependency
	for i, ref := range refs {
		key := keys[i]
		if !ref.IsHelmRelease() {
			nr, err := checkTypedDependency(ctx, typed, i, ref, exprs[i], selfMap, opts)
			if err != nil {
				return err
			}
			if nr != nil {
				notReady = append(notReady, *nr)
			}
			continue
		}
		nr, err := checkHelmReleaseDependency(ctx, c, obj, key, ref, exprs[i], selfMap, opts)
		if err != nil {
			return err
		}
		if nr != nil {
			notReady = append(notReady, *nr)
		}
	}
	if len(notReady) > 0 {
		return &DependencyNotReadyError{Dependencies: notReady}
	}
	return nil
}

// checkHelmReleaseDependency reads the HelmRelease entry key and says why it
// is not met, as upstream words it, or nil when it is: its Ready condition
// of the current generation (and no cycle back to obj), or its readyExpr
// instead (or, with AdditiveCEL, besides).
func checkHelmReleaseDependency(ctx context.Context, c client.Reader, obj *v2.HelmRelease, key client.ObjectKey,
	ref v2.DependencyReference, expr *runtimecel.Expression, selfMap func() (map[string]any, error), opts dependencyOptions,
) (*NotReadyDependency, error) {
	dep := &v2.HelmRelease{}
	if err := c.Get(ctx, key, dep); err != nil {
		if apierrors.IsNotFound(err) {
			return &NotReadyDependency{Key: key, NotFound: true}, nil
		}
		return nil, fmt.Errorf("failed to get dependency '%s': %w", key, err)
	}
	var reasons []string
	if expr == nil || opts.AdditiveCEL {
		reason, err := builtinOrCycleReason(ctx, c, obj, dep)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if expr != nil {
		self, err := selfMap()
		if err != nil {
			return nil, err
		}
		depMap, err := helmReleaseToMap(dep)
		if err != nil {
			return nil, err
		}
		reason, err := readyExprNotReadyReason(ctx, expr, ref.ReadyExpr, self, depMap)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if len(reasons) > 0 {
		return &NotReadyDependency{Key: key, Reason: strings.Join(reasons, ", and ")}, nil
	}
	return nil, nil
}

// validateDependencies checks every entry of obj.Spec.DependsOn without
// reading any dependency, and returns the key of each entry and its
// compiled readyExpr (nil when it has none), or an *InvalidDependencyError
// naming every invalid entry.
func validateDependencies(obj *v2.HelmRelease, opts dependencyOptions) ([]client.ObjectKey, []*runtimecel.Expression, error) {
	refs := obj.Spec.DependsOn
	keys := make([]client.ObjectKey, len(refs))
	exprs := make([]*runtimecel.Expression, len(refs))
	var problems []string
	invalidCEL := false
	for i, ref := range refs {
		key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
		if key.Namespace == "" {
			key.Namespace = obj.Namespace
		}
		keys[i] = key

		if !ref.IsHelmRelease() || ref.APIVersion != "" {
			// Entries with a kind are new to this controller: their rules
			// are its own, and a namespace it may not reach is refused
			// rather than checked.
			if problem := typedEntryProblem(obj, i, ref, key, opts); problem != "" {
				problems = append(problems, problem)
				continue
			}
		}

		switch {
		case ref.Name == "":
			problems = append(problems, fmt.Sprintf("entry %d has no name: set spec.dependsOn[%d].name to the name of a HelmRelease", i, i))
			continue
		case !ref.IsHelmRelease():
			// Not a HelmRelease: the checks below are about those.
		case key.Namespace == obj.Namespace && key.Name == obj.Name && (ref.ReadyExpr == "" || opts.AdditiveCEL):
			// The built-in check needs this very generation reconciled,
			// which waits for the check: upstream waits forever. A
			// readyExpr alone may let it pass, there as here.
			problems = append(problems, fmt.Sprintf("dependency '%s' is the HelmRelease itself: remove it from spec.dependsOn", key))
			continue
		case opts.NoCrossNamespaceRefs && key.Namespace != obj.Namespace && opts.Warn != nil:
			opts.Warn(fmt.Sprintf("dependency '%s' is in another namespace than the HelmRelease while cross-namespace references are disabled "+
				"(--no-cross-namespace-refs); as upstream helm-controller, the controller checks it all the same", key))
		}

		if ref.ReadyExpr != "" {
			expr, err := runtimecel.NewExpression(ref.ReadyExpr,
				runtimecel.WithCompile(),
				runtimecel.WithOutputType(celgo.BoolType),
				runtimecel.WithStructVariables(readyExprSelfVar, readyExprDepVar))
			if err != nil {
				problems = append(problems, fmt.Sprintf(
					"readyExpr of dependency '%s' is not a valid CEL expression returning a bool (variables: self, dep): %v",
					key, err))
				invalidCEL = true
				continue
			}
			exprs[i] = expr
		}
	}
	if len(problems) > 0 {
		return nil, nil, &InvalidDependencyError{Problems: problems, InvalidCEL: invalidCEL}
	}
	return keys, exprs, nil
}

// builtinOrCycleReason says why dep is not ready by the built-in check, or
// "" when it is. A dependency that waits for obj in turn is not ready
// because of the cycle, which is named instead of its own reason.
func builtinOrCycleReason(ctx context.Context, c client.Reader, obj, dep *v2.HelmRelease) (string, error) {
	reason := builtinNotReadyReason(dep)
	if reason == "" {
		return "", nil
	}
	// A dependency that waits for this HelmRelease in turn
	// quotes its message, which quotes the dependency's, and
	// so on: each round would add to both messages without
	// end. The cycle itself is the reason.
	cycle, err := dependencyCycle(ctx, c, client.ObjectKeyFromObject(obj), dep)
	if err != nil {
		return "", err
	}
	if cycle != "" {
		reason = "it depends on this HelmRelease in turn (dependency cycle " + cycle + ")"
	}
	return reason, nil
}

// maxCycleSearch bounds the HelmReleases dependencyCycle reads.
const maxCycleSearch = 100

// dependencyCycle returns the cycle "a -> b -> a" when dep depends on self,
// directly or through other HelmReleases, or "" when it does not. Missing
// HelmReleases end a path; the search reads at most maxCycleSearch of them.
func dependencyCycle(ctx context.Context, c client.Reader, self client.ObjectKey, dep *v2.HelmRelease) (string, error) {
	type node struct {
		hr   *v2.HelmRelease
		path []client.ObjectKey
	}
	depKey := client.ObjectKeyFromObject(dep)
	queue := []node{{hr: dep, path: []client.ObjectKey{self, depKey}}}
	seen := map[client.ObjectKey]bool{depKey: true}
	for len(queue) > 0 && len(seen) <= maxCycleSearch {
		n := queue[0]
		queue = queue[1:]
		for _, ref := range n.hr.Spec.DependsOn {
			if !ref.IsHelmRelease() {
				// Only HelmReleases wait for this one in turn.
				continue
			}
			key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
			if key.Namespace == "" {
				key.Namespace = n.hr.Namespace
			}
			path := append(slices.Clone(n.path), key)
			if key == self {
				names := make([]string, len(path))
				for i, k := range path {
					names[i] = k.String()
				}
				return strings.Join(names, " -> "), nil
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			next := &v2.HelmRelease{}
			if err := c.Get(ctx, key, next); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return "", fmt.Errorf("failed to get dependency '%s' of '%s': %w", key, client.ObjectKeyFromObject(n.hr), err)
			}
			queue = append(queue, node{hr: next, path: path})
		}
	}
	return "", nil
}

// builtinNotReadyReason returns why dep fails the built-in readiness check,
// or "" when it passes. The Ready condition is reported first, as its message
// usually explains a stale generation too.
func builtinNotReadyReason(dep *v2.HelmRelease) string {
	ready := apimeta.FindStatusCondition(dep.Status.Conditions, meta.ReadyCondition)
	switch {
	case ready == nil:
		return "it has no Ready condition yet"
	case ready.Status != metav1.ConditionTrue:
		if ready.Message == "" {
			return fmt.Sprintf("Ready condition is %s", ready.Status)
		}
		return fmt.Sprintf("Ready condition is %s: %s", ready.Status, ready.Message)
	case dep.Status.ObservedGeneration != dep.Generation:
		return fmt.Sprintf("latest generation %d is not reconciled yet (observed generation %d)",
			dep.Generation, dep.Status.ObservedGeneration)
	}
	return ""
}

// readyExprNotReadyReason evaluates a compiled readyExpr against self and
// the dependency's JSON form and returns why the dependency is not ready by
// it, or "" when it evaluates to true.
func readyExprNotReadyReason(ctx context.Context, expr *runtimecel.Expression, source string, self, depMap map[string]any) (string, error) {
	ok, err := expr.EvaluateBoolean(ctx, map[string]any{
		readyExprSelfVar: self,
		readyExprDepVar:  depMap,
	})
	if err != nil {
		return "readyExpr could not be evaluated: " + err.Error(), nil
	}
	if !ok {
		// Block scalars in YAML leave newlines and indentation in the
		// expression; print it on one line.
		return fmt.Sprintf("readyExpr '%s' evaluated to false", strings.Join(strings.Fields(source), " ")), nil
	}
	return "", nil
}

// helmReleaseToMap returns the JSON form of a HelmRelease as a CEL variable,
// with apiVersion and kind set even when the client left them empty.
func helmReleaseToMap(hr *v2.HelmRelease) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(hr)
	if err != nil {
		return nil, fmt.Errorf("failed to convert HelmRelease '%s' for readyExpr evaluation: %w", client.ObjectKeyFromObject(hr), err)
	}
	if s, _ := m["apiVersion"].(string); s == "" {
		m["apiVersion"] = v2.GroupVersion.String()
	}
	if s, _ := m["kind"].(string); s == "" {
		m["kind"] = "HelmRelease"
	}
	return m, nil
}

// dependencyReader reads a dependency from the controller's cache, and from
// the API server when the cache cannot tell: it holds only the HelmReleases
// of this controller's shard and watched namespaces, while a dependency may
// be anywhere, as upstream, which reads every dependency from the API
// server. A dependency in the cache costs no request.
type dependencyReader struct {
	cache, api client.Reader
}

func (r dependencyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.cache.Get(ctx, key, obj, opts...); err == nil {
		return nil
	}
	return r.api.Get(ctx, key, obj, opts...)
}

func (r dependencyReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.api.List(ctx, list, opts...)
}
