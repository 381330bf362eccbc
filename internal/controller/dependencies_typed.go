package controller

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	runtimecel "github.com/fluxcd/pkg/runtime/cel"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Entries of spec.dependsOn with a kind name any object: a CRD that must
// exist, a Deployment that must be available, a Secret another tool
// writes. Their rules are this controller's own (upstream has not released
// them): the kind is resolved through discovery, the object is read with
// the release's identity, and ready: true asks kstatus whether it is
// Current.

// typedDependencyRef names an entry with a kind in messages:
// apiVersion/Kind/namespace/name, or apiVersion/Kind/name when namespace is
// empty (a cluster-scoped kind).
func typedDependencyRef(ref v2.DependencyReference, namespace string) string {
	parts := []string{ref.APIVersion, ref.Kind}
	if namespace != "" {
		parts = append(parts, namespace)
	}
	return strings.Join(append(parts, ref.Name), "/")
}

// typedEntryProblem returns why the entry i with a kind (or an apiVersion)
// can never be checked as written, without reading anything, or "" when
// nothing is wrong with it yet. key is its name with the namespace
// defaulted to obj's.
func typedEntryProblem(obj *v2.HelmRelease, i int, ref v2.DependencyReference, key client.ObjectKey, opts dependencyOptions) string {
	name := typedDependencyRef(ref, key.Namespace)
	switch {
	case ref.Kind == "":
		return fmt.Sprintf("dependency '%s' has an apiVersion but no kind: set spec.dependsOn[%d].kind, "+
			"or remove its apiVersion to name a HelmRelease", name, i)
	case ref.APIVersion == "":
		return fmt.Sprintf("dependency '%s' has a kind but no apiVersion: set spec.dependsOn[%d].apiVersion "+
			"(v1 for core kinds, apps/v1 for Deployments, ...)", name, i)
	case ref.Name == "":
		return fmt.Sprintf("entry %d has no name: set spec.dependsOn[%d].name to the name of the %s", i, i, ref.Kind)
	}
	if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
		return fmt.Sprintf("dependency '%s' has an invalid apiVersion: %v", name, err)
	}
	if opts.NoCrossNamespaceRefs && key.Namespace != obj.Namespace {
		return fmt.Sprintf("dependency '%s' is in another namespace than the HelmRelease while cross-namespace "+
			"references are disabled (--no-cross-namespace-refs): move it to namespace '%s' or remove it", name, obj.Namespace)
	}
	return ""
}

// typedDependency is an entry with a kind, resolved: where it lives and
// how to read it.
type typedDependency struct {
	gvk schema.GroupVersionKind
	key client.ObjectKey
	ref string
}

// typedDependencies are the resolved entries with a kind, by index in
// spec.dependsOn, and the access that reads them.
type typedDependencies struct {
	access *typedAccess
	deps   map[int]typedDependency
	// unserved are the entries whose kind the cluster does not serve,
	// with why: most often a CustomResourceDefinition another release
	// installs, so they are waited for, not stalled.
	unserved map[int]string
}

// resolveTypedDependencies maps the kind of every entry that has one to
// its resource through the REST mapper of the release's cluster. A kind
// the cluster does not serve is kept in unserved, to be waited for; a
// namespace on a cluster-scoped kind is an *InvalidDependencyError naming
// every such entry; a failing discovery is a plain error, retried.
func resolveTypedDependencies(ctx context.Context, obj *v2.HelmRelease, keys []client.ObjectKey, opts dependencyOptions) (typedDependencies, error) {
	var out typedDependencies
	refs := obj.Spec.DependsOn
	for i, ref := range refs {
		if ref.IsHelmRelease() {
			continue
		}
		if out.access == nil {
			if opts.Typed == nil {
				return out, fmt.Errorf("dependency '%s' names a kind, and no client reads other kinds than HelmRelease",
					typedDependencyRef(ref, keys[i].Namespace))
			}
			access, err := opts.Typed(ctx)
			if err != nil {
				return out, fmt.Errorf("failed to connect for the dependencies of other kinds than HelmRelease: %w", err)
			}
			out.access, out.deps, out.unserved = access, map[int]typedDependency{}, map[int]string{}
		}
	}
	if out.access == nil {
		return out, nil
	}

	var problems []string
	for i, ref := range refs {
		if ref.IsHelmRelease() {
			continue
		}
		// typedEntryProblem has parsed it already.
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		gvk := gv.WithKind(ref.Kind)
		key := keys[i]
		mapping, err := out.access.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case apimeta.IsNoMatchError(err):
			// Its scope is unknown: named as the namespaced kind it most
			// likely is.
			out.deps[i] = typedDependency{gvk: gvk, key: key, ref: typedDependencyRef(ref, key.Namespace)}
			out.unserved[i] = fmt.Sprintf("the cluster serves no kind %s in %s (yet): its CustomResourceDefinition "+
				"may still be on its way; else check spec.dependsOn[%d].apiVersion and kind", ref.Kind, ref.APIVersion, i)
			continue
		case err != nil:
			return out, fmt.Errorf("failed to resolve the kind of dependency '%s': %w", typedDependencyRef(ref, key.Namespace), err)
		}
		if mapping.Scope.Name() == apimeta.RESTScopeNameRoot {
			if ref.Namespace != "" {
				problems = append(problems, fmt.Sprintf("dependency '%s' is of a cluster-scoped kind: remove spec.dependsOn[%d].namespace",
					typedDependencyRef(ref, ref.Namespace), i))
				continue
			}
			key.Namespace = ""
		}
		out.deps[i] = typedDependency{gvk: gvk, key: key, ref: typedDependencyRef(ref, key.Namespace)}
	}
	if len(problems) > 0 {
		return out, &InvalidDependencyError{Problems: problems}
	}
	return out, nil
}

// checkTypedDependency reads the entry i with a kind and says why it is not
// met, or nil when it is. Existence is always needed; ready: true adds
// kstatus' Current, and a readyExpr replaces that (or, with AdditiveCEL,
// adds to it). The body is read only when something judges it; otherwise
// the metadata alone tells that the object exists.
func checkTypedDependency(ctx context.Context, typed typedDependencies, i int, ref v2.DependencyReference,
	expr *runtimecel.Expression, selfMap func() (map[string]any, error), opts dependencyOptions,
) (*NotReadyDependency, error) {
	dep := typed.deps[i]
	if why, ok := typed.unserved[i]; ok {
		return &NotReadyDependency{Key: dep.key, Ref: dep.ref, Reason: why}, nil
	}
	builtin := ref.Ready && (expr == nil || opts.AdditiveCEL)
	var got client.Object
	var body *unstructured.Unstructured
	if builtin || expr != nil {
		body = &unstructured.Unstructured{}
		body.SetGroupVersionKind(dep.gvk)
		got = body
	} else {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(dep.gvk)
		got = m
	}
	err := typed.access.Reader.Get(ctx, dep.key, got)
	switch {
	case apierrors.IsNotFound(err):
		return &NotReadyDependency{Key: dep.key, Ref: dep.ref, NotFound: true}, nil
	case apierrors.IsForbidden(err):
		// Never passes: the release may not rely on what its identity
		// cannot see. RBAC may change, so it is waited on, not stalled.
		return &NotReadyDependency{Key: dep.key, Ref: dep.ref,
			Reason: fmt.Sprintf("reading it as %s is forbidden: %v", typed.access.Identity, err)}, nil
	case err != nil:
		return nil, fmt.Errorf("failed to get dependency '%s': %w", dep.ref, err)
	}
	if body == nil {
		return nil, nil
	}

	var reasons []string
	if builtin {
		res, err := status.Compute(body)
		switch {
		case err != nil:
			reasons = append(reasons, "its status cannot be computed: "+err.Error())
		case res.Status != status.CurrentStatus:
			reason := "it is " + res.Status.String()
			if res.Message != "" {
				reason += ": " + res.Message
			}
			reasons = append(reasons, reason)
		}
	}
	if expr != nil {
		self, err := selfMap()
		if err != nil {
			return nil, err
		}
		reason, err := readyExprNotReadyReason(ctx, expr, ref.ReadyExpr, self, body.Object)
		if err != nil {
			return nil, err
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if len(reasons) > 0 {
		return &NotReadyDependency{Key: dep.key, Ref: dep.ref, Reason: strings.Join(reasons, ", and ")}, nil
	}
	return nil, nil
}
