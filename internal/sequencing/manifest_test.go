package sequencing

import (
	"reflect"
	"testing"
)

func TestChartPath(t *testing.T) {
	tests := map[string]string{
		"shop/templates/deployment.yaml":                      "shop",
		"shop/charts/db/templates/statefulset.yaml":           "shop/db",
		"shop/charts/db/charts/backup/templates/cronjob.yaml": "shop/db/backup",
		"shop/templates/charts/not-a-subchart.yaml":           "shop",
		"shop/charts/db/templates/charts/still-db.yaml":       "shop/db",
		"shop": "shop",
		"":     "",
		"kustomization-added-by-a-post-renderer/templates/x.yaml": "kustomization-added-by-a-post-renderer",
	}
	for source, want := range tests {
		if got := ChartPath(source); got != want {
			t.Errorf("ChartPath(%q) = %q, want %q", source, got, want)
		}
	}
}

func TestParseManifest(t *testing.T) {
	manifest := `---
# Source: shop/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: creds
  annotations:
    helm.sh/resource-group: db
---
# Source: shop/charts/db/templates/sts.yaml
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: data
---
# Source: shop/templates/empty.yaml
# nothing rendered here
---
# Source: shop/templates/list.yaml
apiVersion: v1
kind: ConfigMapList
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: one
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: two
---
# Source: shop/templates/crd-object.yaml
apiVersion: example.com/v1alpha1
kind: Widget
metadata:
  name: w
  annotations:
    helm.sh/depends-on/resource-groups: '["db"]'
    note: "--- inside a value"
`
	got, err := ParseManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	want := []Resource{
		{ID: ObjectID{Kind: "Secret", Name: "creds"}, Chart: "shop", Annotations: map[string]string{AnnotationResourceGroup: "db"}},
		{ID: ObjectID{Group: "apps", Kind: "StatefulSet", Namespace: "data", Name: "db"}, Chart: "shop/db"},
		{ID: ObjectID{Kind: "ConfigMap", Name: "one"}, Chart: "shop"},
		{ID: ObjectID{Kind: "ConfigMap", Name: "two"}, Chart: "shop"},
		{ID: ObjectID{Group: "example.com", Kind: "Widget", Name: "w"}, Chart: "shop",
			Annotations: map[string]string{AnnotationDependsOnGroups: `["db"]`, "note": "--- inside a value"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseManifest\n got: %+v\nwant: %+v", got, want)
	}
}

func TestParseManifestNamesTheBrokenDocument(t *testing.T) {
	_, err := ParseManifest("---\n# Source: shop/templates/ok.yaml\nkind: ConfigMap\n---\n# Source: shop/templates/bad.yaml\nkind: [\n")
	if err == nil || !contains(err.Error(), "shop/templates/bad.yaml") {
		t.Fatalf("error = %v, want it to name the broken document's source", err)
	}
}
