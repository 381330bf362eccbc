package action

import (
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// crdKind is one served version of a kind a CRD defines.
type crdKind struct{ group, version, kind string }

// unservedCRDKinds are the versions of the kinds the chart's crds/ define
// (its subcharts' included) that the cluster does not serve.
func unservedCRDKinds(cfg *helmaction.Configuration, chrt *chartv2.Chart) ([]crdKind, error) {
	crds := chrt.CRDObjects()
	if len(crds) == 0 || cfg.RESTClientGetter == nil {
		return nil, nil
	}
	mapper, err := cfg.RESTClientGetter.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's kinds: %w", err)
	}
	var out []crdKind
	for _, obj := range crds {
		if obj.File == nil {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(string(obj.File.Data)) {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal([]byte(doc), &crd); err != nil || crd.Kind != "CustomResourceDefinition" {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
				_, err := mapper.RESTMapping(gk, v.Name)
				switch {
				case meta.IsNoMatchError(err):
					out = append(out, crdKind{group: gk.Group, version: v.Name, kind: gk.Kind})
				case err != nil:
					return nil, fmt.Errorf("reading the cluster's kinds: %w", err)
				}
			}
		}
	}
	return out, nil
}
