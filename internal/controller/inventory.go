package controller

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/cli-utils/pkg/object"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// releaseInventory lists the objects a release manages, in upstream's order:
// the objects of its manifest as Helm rendered them (hooks excluded), then
// the CRDs of its chart's crds/ directory, each with the namespace it lives
// in. Objects whose kind the mapper does not know (a CRD installed by the
// same release, say) keep the namespace the manifest gives them, if any, as
// upstream does. An object listed twice (a CRD both templated and in crds/)
// is listed once.
func releaseInventory(rel *releasev1.Release, mapper apimeta.RESTMapper) (*helmv2.ResourceInventory, error) {
	objects, err := ssautil.ReadObjects(strings.NewReader(rel.Manifest))
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of release %s/%s.v%d: %w", rel.Namespace, rel.Name, rel.Version, err)
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
				return nil, fmt.Errorf("reading CRD %s of the chart: %w", crd.Filename, err)
			}
			objects = append(objects, crdObjects...)
		}
	}

	inv := &helmv2.ResourceInventory{Entries: []helmv2.ResourceRef{}}
	seen := map[string]bool{}
	for _, obj := range objects {
		if obj.GetNamespace() == "" && namespaced(obj, mapper) {
			obj.SetNamespace(rel.Namespace)
		}
		id := object.UnstructuredToObjMetadata(obj).String()
		if seen[id] {
			continue
		}
		seen[id] = true
		inv.Entries = append(inv.Entries, helmv2.ResourceRef{ID: id, Version: obj.GroupVersionKind().Version})
	}
	return inv, nil
}

func namespaced(obj *unstructured.Unstructured, mapper apimeta.RESTMapper) bool {
	if mapper == nil {
		return false
	}
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false
	}
	return mapping.Scope.Name() == apimeta.RESTScopeNameNamespace
}
