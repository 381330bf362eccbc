package controller

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestReleaseInventory(t *testing.T) {
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, apimeta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, apimeta.RESTScopeRoot)

	rel := &releasev1.Release{
		Name: "app", Namespace: "apps", Version: 1,
		Manifest: `---
# Source: app/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: other
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
---
apiVersion: v1
kind: Service
metadata:
  name: web
---
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.sh/hook: post-install
`,
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "app"}, Files: []*common.File{{
			Name: "crds/widgets.yaml",
			Data: []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n"),
		}}},
	}
	inv, err := releaseInventory(rel, mapper)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's order: the manifest as rendered, then the chart's CRDs;
	// the hook is left out.
	want := []string{
		"apps_web_apps_Deployment",
		"other_web__Service",
		"_reader_rbac.authorization.k8s.io_ClusterRole",
		"apps_web__Service",
		"_widgets.example.com_apiextensions.k8s.io_CustomResourceDefinition",
	}
	if len(inv.Entries) != len(want) {
		t.Fatalf("entries %+v, want %v", inv.Entries, want)
	}
	for i, id := range want {
		if inv.Entries[i].ID != id {
			t.Errorf("entry %d = %s, want %s", i, inv.Entries[i].ID, id)
		}
	}
	if inv.Entries[0].Version != "v1" {
		t.Errorf("version %q", inv.Entries[3].Version)
	}

	rel.Manifest = "kind: [broken"
	if _, err := releaseInventory(rel, mapper); err == nil {
		t.Error("a broken manifest gave no error")
	}
}
