package controller

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// releaseInventory lists the objects a release manages, in upstream's order:
// the objects of its manifest as Helm rendered them (hooks excluded), then
// the CRDs of its chart's crds/ directory, each with the namespace it lives
// in. Objects whose kind the mapper does not know (a CRD installed by the
// same release, say) keep the namespace the manifest gives them, if any, as
// upstream does. An object listed twice (a CRD both templated and in crds/)
// is listed once.
func releaseInventory(rel *releasev1.Release, mapper apimeta.RESTMapper) (*helmv2.ResourceInventory, error) {
	inv, _, err := listInventory(rel, mapper)
	return inv, err
}

// listInventory is releaseInventory, and whether the mapper knew every
// kind: only then is the inventory final for this record.
func listInventory(rel *releasev1.Release, mapper apimeta.RESTMapper) (inv *helmv2.ResourceInventory, final bool, err error) {
	objects, err := ssautil.ReadObjects(strings.NewReader(rel.Manifest))
	if err != nil {
		return nil, false, fmt.Errorf("reading the manifest of release %s/%s.v%d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	// Helm keeps hooks out of the manifest; an object annotated as one
	// anyway is not part of the release's steady state.
	objects = slices.DeleteFunc(objects, func(obj *unstructured.Unstructured) bool {
		_, hook := obj.GetAnnotations()[releasev1.HookAnnotation]
		return hook
	})
	if rel.Chart != nil {
		for _, crd := range rel.Chart.CRDObjects() {
			crdObjects, err := ssautil.ReadObjects(strings.NewReader(string(crd.File.Data)))
			if err != nil {
				return nil, false, fmt.Errorf("reading CRD %s of the chart: %w", crd.Filename, err)
			}
			objects = append(objects, crdObjects...)
		}
	}

	inv = &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{}}
	seen := map[string]bool{}
	final = true
	for _, obj := range objects {
		scoped, known := namespaced(obj, mapper)
		final = final && known
		if obj.GetNamespace() == "" && scoped {
			obj.SetNamespace(rel.Namespace)
		}
		id := object.UnstructuredToObjMetadata(obj).String()
		if seen[id] {
			continue
		}
		seen[id] = true
		inv.Entries = append(inv.Entries, helmv2.ResourceRef{ID: id, Version: obj.GroupVersionKind().Version})
	}
	return inv, final, nil
}

// namespaced tells whether obj's kind is namespaced, and whether the
// mapper knows the kind at all.
func namespaced(obj *unstructured.Unstructured, mapper apimeta.RESTMapper) (scoped, known bool) {
	if mapper == nil {
		return false, false
	}
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, false
	}
	return mapping.Scope.Name() == apimeta.RESTScopeNameNamespace, true
}

// inventories remembers, per HelmRelease, the inventory of the release
// record it listed last, so that a reconcile that finds the same record
// does not parse its manifest again. A record is recognised by the digest
// of what the inventory is made from (namespace, manifest, the chart's
// CRDs); only an inventory whose kinds the mapper all knew is kept, since
// one listed before a kind was served may change once it is.
type inventories struct{ perRelease[inventoryEntry] }

type inventoryEntry struct {
	digest [sha256.Size]byte
	inv    *helmv2.ResourceInventory
}

// of returns the inventory of rel for the HelmRelease key.
func (m *inventories) of(key types.NamespacedName, rel *releasev1.Release, mapper apimeta.RESTMapper) (*helmv2.ResourceInventory, error) {
	digest := inventorySource(rel)
	if e, ok := m.get(key); ok && e.digest == digest {
		return e.inv.DeepCopy(), nil
	}
	inv, final, err := listInventory(rel, mapper)
	if err != nil || !final {
		m.forget(key)
		return inv, err
	}
	m.set(key, inventoryEntry{digest: digest, inv: inv.DeepCopy()})
	return inv, nil
}

// inventorySource digests what releaseInventory reads of rel.
func inventorySource(rel *releasev1.Release) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range []string{rel.Namespace, rel.Manifest} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	if rel.Chart != nil {
		for _, crd := range rel.Chart.CRDObjects() {
			fmt.Fprintf(h, "%d:%s%d:", len(crd.Filename), crd.Filename, len(crd.File.Data))
			h.Write(crd.File.Data)
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
