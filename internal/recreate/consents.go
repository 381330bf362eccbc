package recreate

import (
	"encoding/json"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
)

// Consents are the objects of one release manifest annotated
// helm.toolkit.fluxcd.io/force: enabled. A rollback carries them over from
// the revision it rolls back from (Policy.RolledBackFrom): what that
// revision was allowed to recreate, it may recreate back.
type Consents map[consentKey]bool

// consentKey names an object as its manifest does: namespace is "" when
// the manifest gives none (Helm then puts a namespaced object in the
// release's namespace).
type consentKey struct {
	kind            schema.GroupKind
	namespace, name string
}

// ConsentsOf reads the consents of a Helm release manifest (its documents
// separated by ---). A document that does not parse as an object gives no
// consent.
func ConsentsOf(manifest string) Consents {
	consents := Consents{}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetAnnotations()[Annotation] != Enabled || u.GetName() == "" {
			continue
		}
		consents[consentKey{kind: u.GroupVersionKind().GroupKind(), namespace: u.GetNamespace(), name: u.GetName()}] = true
	}
	return consents
}

// has tells whether the manifest consented to the object r refers to: by
// kind, name and namespace; a manifest that named no namespace stands for
// releaseNamespace (or a cluster-scoped object).
func (c Consents) has(r Refused, releaseNamespace string) bool {
	if len(c) == 0 || r.Desired == nil {
		return false
	}
	key := consentKey{kind: r.Kind, namespace: r.Desired.GetNamespace(), name: r.Desired.GetName()}
	if c[key] {
		return true
	}
	if key.namespace != "" && key.namespace != releaseNamespace {
		return false
	}
	key.namespace = ""
	return c[key]
}

// MarshalJSON prints the consents as a sorted list of Kind[.group]/[namespace/]name,
// so a plan that carries them can be shown.
func (c Consents) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(c))
	for key, ok := range c {
		if ok {
			names = append(names, key.String())
		}
	}
	sort.Strings(names)
	return json.Marshal(names)
}

// String names the object as kubectl does: Kind[.group]/[namespace/]name.
func (k consentKey) String() string {
	name := k.name
	if k.namespace != "" {
		name = k.namespace + "/" + name
	}
	return k.kind.String() + "/" + name
}
