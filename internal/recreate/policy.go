package recreate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Annotation lets one object be recreated (Enabled) or never be recreated
// (Disabled) when an update of it is refused for an immutable field. It
// is read from the object's manifest (the chart, a post renderer or
// spec.commonMetadata set it); Disabled on the object in the cluster is
// honoured too, as kustomize-controller reads it there.
const (
	Annotation = "helm.toolkit.fluxcd.io/force"
	Enabled    = "enabled"
	Disabled   = "disabled"
)

// GateName is the feature gate that lets the kinds of gateKinds be
// recreated without the annotation.
const GateName = "RecreateImmutableResources"

// Release is the Helm release whose objects are recreated. An object the
// cluster says belongs to another release is never deleted.
type Release struct {
	Name, Namespace string
}

// Policy decides which refused objects may be recreated. An object needs
// consent (the annotation, or the gate for the kinds it covers) and must
// pass every guard (see guard), which no consent lifts.
type Policy struct {
	// Gate is the RecreateImmutableResources feature gate: it consents
	// for the built-in kinds of gateKinds, when the API server refused
	// only the fields listed for the kind.
	Gate bool
	// Release is the release the objects belong to; empty skips the
	// check of ownership (a caller that cannot know it).
	Release Release
	// Memory, when set, keeps the objects this policy recreated, so an
	// object refused again after its recreate is not recreated again.
	Memory *Memory
	// RolledBackFrom, for a rollback, are the consents of the revision it
	// rolls back from (the release's latest): an object that revision's
	// manifest annotated enabled may be recreated back, unless the
	// manifest applied now opts it out. The guards apply as ever.
	RolledBackFrom Consents `json:",omitempty"`
}

// never are the kinds a recreate never deletes: each holds data (or, for a
// Namespace or a CRD, every object inside or of it) that deleting would
// lose.
var never = map[schema.GroupKind]bool{
	{Kind: "PersistentVolumeClaim"}: true,
	{Kind: "PersistentVolume"}:      true,
	{Kind: "Namespace"}:             true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
}

// neverRecreated says why an object of kind gk is never recreated, or "".
func neverRecreated(gk schema.GroupKind) string {
	if !never[gk] {
		return ""
	}
	return fmt.Sprintf("a %s is never recreated, since deleting it could lose data: change it by hand", gk.Kind)
}

// Consent is what lets an object be recreated.
type Consent string

// The consents, as a plan names them.
const (
	ConsentAnnotation     Consent = "its manifest says " + Annotation + ": " + Enabled
	ConsentRolledBackFrom Consent = "the revision rolled back from says " + Annotation + ": " + Enabled
	ConsentGate           Consent = "the " + GateName + " feature gate"
)

// consent tells what consents to recreating the object r refers to, as
// far as its owner's wishes go: its manifest's annotation, else, in a
// rollback, the annotation in the revision rolled back from, else the
// gate; "" when nothing does. Then advice says what would give consent,
// or why nothing can.
func (p Policy) consent(r Refused) (by Consent, optedOut bool, advice string) {
	switch r.annotation() {
	case Enabled:
		return ConsentAnnotation, false, ""
	case Disabled:
		return "", true, fmt.Sprintf("it opts out of recreation (%s: %s)", Annotation, Disabled)
	}
	if p.RolledBackFrom.has(r, p.Release.Namespace) {
		return ConsentRolledBackFrom, false, ""
	}
	covered := gateCovers(r.Kind, r.Cause)
	if p.Gate && covered {
		return ConsentGate, false, ""
	}
	if covered {
		return "", false, fmt.Sprintf("annotate it %s: %s (or turn on the %s feature gate) to let the controller recreate it", Annotation, Enabled, GateName)
	}
	return "", false, fmt.Sprintf("annotate it %s: %s to let the controller recreate it", Annotation, Enabled)
}
