package hookcleanup

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AllKinds, in spec.uninstall.deleteHookResourceKinds, asks for every kind
// a hook left to be deleted (the guards of Judge still apply).
const AllKinds = "*"

// KindsField is where a user lists the kinds to delete beyond the default
// ones; named in the reason an object of another kind is left.
const KindsField = "spec.uninstall.deleteHookResourceKinds"

// defaultKinds are the kinds a cleanup deletes unless told otherwise:
// what hooks run (Jobs and their Pods) and the identity and permissions
// they run with. None of them holds data a release needs back: a hook's
// Secret may hold a password that the chart reads back with lookup and
// its PersistentVolumeClaims outlive the uninstall, a ConfigMap may hold
// generated state, and a custom resource's operator may delete storage
// with it. Those go only when the user lists their kind.
var defaultKinds = []schema.GroupKind{
	{Group: "batch", Kind: "Job"},
	{Kind: "Pod"},
	{Kind: "ServiceAccount"},
	{Group: "rbac.authorization.k8s.io", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"},
}

// DefaultKinds returns the kinds deleted without being listed, as
// "Kind.group" ("Kind" for the core group), sorted.
func DefaultKinds() []string {
	out := make([]string, 0, len(defaultKinds))
	for _, gk := range defaultKinds {
		out = append(out, gk.String())
	}
	sort.Strings(out)
	return out
}

// Kinds are the kinds of hook objects one cleanup may delete.
type Kinds struct {
	all  bool
	kind map[schema.GroupKind]bool
}

// ParseKinds returns the default kinds plus those listed, each "Kind"
// (core group) or "Kind.group", or AllKinds for every kind.
func ParseKinds(listed []string) (Kinds, error) {
	k := Kinds{kind: map[schema.GroupKind]bool{}}
	for _, gk := range defaultKinds {
		k.kind[gk] = true
	}
	for i, s := range listed {
		s = strings.TrimSpace(s)
		switch {
		case s == AllKinds:
			k.all = true
		case s == "" || strings.HasPrefix(s, ".") || strings.ContainsAny(s, "/ "):
			return Kinds{}, fmt.Errorf("%s[%d]: %q is not a kind (Kind or Kind.group)", KindsField, i, listed[i])
		default:
			k.kind[schema.ParseGroupKind(s)] = true
		}
	}
	return k, nil
}

// Allows tells whether objects of gk may be deleted.
func (k Kinds) Allows(gk schema.GroupKind) bool {
	return k.all || k.kind[gk]
}

// leftReason says why an object of gk, a kind not allowed, is left.
func leftReason(gk schema.GroupKind) string {
	return fmt.Sprintf("a %s may hold data: deleted only when %s lists %s", gk.Kind, KindsField, gk.String())
}
