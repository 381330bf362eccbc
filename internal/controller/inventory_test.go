package controller

import (
	"slices"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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

// TestInventoriesFollowTheRecord: the inventory of a record listed before
// is not parsed again, a changed record is, and an inventory listed while
// a kind was unknown to the mapper is listed again once it is known.
func TestInventoriesFollowTheRecord(t *testing.T) {
	const widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"
	const config = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
	knows := func(kinds ...schema.GroupVersionKind) apimeta.RESTMapper {
		m := apimeta.NewDefaultRESTMapper(nil)
		for _, k := range kinds {
			m.Add(k, apimeta.RESTScopeNamespace)
		}
		return m
	}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	w := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	key := types.NamespacedName{Namespace: "apps", Name: "app"}
	rel := func(manifest string) *releasev1.Release {
		return &releasev1.Release{Name: "app", Namespace: "apps", Version: 1, Manifest: manifest}
	}
	steps := []struct {
		name   string
		rel    *releasev1.Release
		mapper apimeta.RESTMapper
		want   []string
	}{
		{name: "first listing", rel: rel(config), mapper: knows(cm), want: []string{"apps_c__ConfigMap"}},
		// A mapper that knows nothing would list the ConfigMap without
		// its namespace: the kept inventory is used instead.
		{name: "same record", rel: rel(config), mapper: knows(), want: []string{"apps_c__ConfigMap"}},
		{name: "a kind not served yet", rel: rel(config + "---\n" + widget), mapper: knows(cm),
			want: []string{"apps_c__ConfigMap", "_w_example.com_Widget"}},
		{name: "the kind served now", rel: rel(config + "---\n" + widget), mapper: knows(cm, w),
			want: []string{"apps_c__ConfigMap", "apps_w_example.com_Widget"}},
		{name: "another namespace", rel: &releasev1.Release{Name: "app", Namespace: "other", Version: 2, Manifest: config},
			mapper: knows(cm), want: []string{"other_c__ConfigMap"}},
	}
	var m inventories
	for _, s := range steps {
		inv, err := m.of(key, s.rel, s.mapper)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var got []string
		for _, e := range inv.Entries {
			got = append(got, e.ID)
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: inventory %v, want %v", s.name, got, s.want)
		}
		// What the caller does with it is not the kept one.
		inv.Entries[0].ID = "changed"
	}
}
