package recreate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Annotation lets one object be recreated (Enabled) or never be recreated
// (Disabled) when an update of it is refused for an immutable field. It
// is read from the object's manifest: the chart, a post renderer or
// spec.commonMetadata set it.
const (
	Annotation = "helm.toolkit.fluxcd.io/force"
	Enabled    = "enabled"
	Disabled   = "disabled"
)

// Policy decides which objects may be recreated.
type Policy struct {
	// All makes every object recreatable unless it says Disabled: the
	// RecreateImmutableResources feature gate, or an action's force.
	All bool
	// Setting names what else would allow a recreate (e.g.
	// "spec.upgrade.force"), for the advice in ImmutableError; empty when
	// nothing but the annotation would.
	Setting string
}

// kept are the kinds a recreate never deletes: each holds data (or, for a
// Namespace or a CRD, every object inside or of it) that deleting would
// lose.
var kept = map[schema.GroupKind]bool{
	{Kind: "PersistentVolumeClaim"}: true,
	{Kind: "PersistentVolume"}:      true,
	{Kind: "Namespace"}:             true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
}

// Allows tells whether an object of kind gk whose manifest has annotations
// may be recreated and, when not, what the user could do about it.
func (p Policy) Allows(gk schema.GroupKind, annotations map[string]string) (bool, string) {
	if kept[gk] {
		return false, fmt.Sprintf("a %s is never recreated, since deleting it could lose data: change it by hand", gk.Kind)
	}
	switch annotations[Annotation] {
	case Enabled:
		return true, ""
	case Disabled:
		return false, fmt.Sprintf("it opts out of recreation (%s: %s)", Annotation, Disabled)
	}
	if p.All {
		return true, ""
	}
	if p.Setting != "" {
		return false, fmt.Sprintf("annotate it %s: %s (or set %s) to let the controller recreate it", Annotation, Enabled, p.Setting)
	}
	return false, fmt.Sprintf("annotate it %s: %s to let the controller recreate it", Annotation, Enabled)
}
