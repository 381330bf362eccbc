package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// shardKustomization is a shard's flux-system/<shard>/kustomization.yaml
// as docs/operations.md shows it: a second helm-controller Deployment
// from Flux's rendered components, suffixed with the shard's name, that
// watches only the shard's HelmReleases. What the main Deployment already
// brings (namespace, CRDs, RBAC, network policies, service account) is
// dropped; the pods get an app label of their own, and the Deployment an
// annotation that keeps the parent's patches for the main controller off
// it. The parent's component reaches it as it is: kustomize matches a
// patch target against a resource's names before a suffix too.
const shardKustomization = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
nameSuffix: "-SHARD"
commonAnnotations:
  sharding.fluxcd.io/role: shard
resources:
  - ../gotk-components.yaml
patches:
  - target:
      kind: (Namespace|CustomResourceDefinition|ClusterRole|ClusterRoleBinding|ServiceAccount|NetworkPolicy|ResourceQuota|Service)
    patch: |
      apiVersion: v1
      kind: all
      metadata:
        name: all
      $patch: delete
  - target:
      kind: Deployment
      name: helm-controller
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --watch-label-selector=sharding.fluxcd.io/key=SHARD
      - op: replace
        path: /spec/selector/matchLabels/app
        value: helm-controller-SHARD
      - op: replace
        path: /spec/template/metadata/labels/app
        value: helm-controller-SHARD
`

// mainShardPatch makes the main helm-controller take only the HelmReleases
// no shard has. Without the annotation selector it would reach the shards'
// Deployments as well (their names before the suffix match), and a shard
// would end with two selectors, the last one winning.
const mainShardPatch = `patches:
  - target:
      kind: Deployment
      name: helm-controller
      annotationSelector: "!sharding.fluxcd.io/role"
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --watch-label-selector=!sharding.fluxcd.io/key
`

// TestFluxComponentInShards renders a flux-system kustomization with two
// helm-controller shards as docs/operations.md lays it out, the way
// kustomize-controller builds it (files outside a kustomization's root
// allowed). Every helm-controller runs our image with exactly one
// selector, its own, and the CRD is ours and rendered once. The same
// layout with the main controller's patch targeted by name alone gives
// each shard a second selector that overrides its own: the pitfall the
// docs warn of.
func TestFluxComponentInShards(t *testing.T) {
	want := map[string]string{
		"helm-controller":        "--watch-label-selector=!sharding.fluxcd.io/key",
		"helm-controller-shard1": "--watch-label-selector=sharding.fluxcd.io/key=shard1",
		"helm-controller-shard2": "--watch-label-selector=sharding.fluxcd.io/key=shard2",
	}
	objects := renderShards(t, mainShardPatch)
	for name, selector := range want {
		deploy, ok := objects["Deployment/flux-system/"+name]
		if !ok {
			t.Errorf("no Deployment %s rendered", name)
			continue
		}
		if got := managerImage(t, deploy); got != ourImage {
			t.Errorf("Deployment %s runs %q, want %q", name, got, ourImage)
		}
		if got := selectorFlags(deploy); len(got) != 1 || got[0] != selector {
			t.Errorf("Deployment %s has selectors %q, want only %s", name, got, selector)
		}
		app, _, _ := unstructured.NestedString(deploy, "spec", "template", "metadata", "labels", "app")
		if app != name {
			t.Errorf("Deployment %s pods labelled app=%q, want their own", name, app)
		}
	}
	var crds, deployments int
	for key := range objects {
		switch {
		case strings.HasPrefix(key, "CustomResourceDefinition/"):
			crds++
		case strings.HasPrefix(key, "Deployment/"):
			deployments++
		}
	}
	if deployments != len(want) {
		t.Errorf("%d Deployments rendered, want %d", deployments, len(want))
	}
	crd, ok := objects[crdKey]
	if !ok || crds != 1 {
		t.Fatalf("%d CRDs rendered, want our HelmRelease CRD once", crds)
	}
	ours := loadCRDMap(t, filepath.Join("..", "..", "config", "crd", "bases", "helm.toolkit.fluxcd.io_helmreleases.yaml"))
	if !reflect.DeepEqual(jsonNormal(t, crd["spec"]), jsonNormal(t, ours["spec"])) {
		t.Error("the rendered HelmRelease CRD is not ours")
	}

	t.Run("main patch by name alone", func(t *testing.T) {
		byName := strings.Replace(mainShardPatch, "      annotationSelector: \"!sharding.fluxcd.io/role\"\n", "", 1)
		if byName == mainShardPatch {
			t.Fatal("the annotation selector was not taken out")
		}
		shard := renderShards(t, byName)["Deployment/flux-system/helm-controller-shard1"]
		got := selectorFlags(shard)
		if len(got) != 2 || got[len(got)-1] != want["helm-controller"] {
			t.Errorf("shard1's selectors %q; want its own followed by the main one's, which wins", got)
		}
	})
}

// renderShards writes a flux-system directory with the stand-in, shards
// shard1 and shard2, our component and mainPatch in the parent, and
// builds it.
func renderShards(t *testing.T, mainPatch string) map[string]map[string]any {
	t.Helper()
	dir := t.TempDir()
	gotk, err := os.ReadFile(renderFluxStandIn(t, dir, upstreamRegistry))
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "flux-system")
	framework.WriteFile(t, filepath.Join(root, "gotk-components.yaml"), string(gotk))
	for _, shard := range []string{"shard1", "shard2"} {
		framework.WriteFile(t, filepath.Join(root, shard, "kustomization.yaml"), strings.ReplaceAll(shardKustomization, "SHARD", shard))
	}
	abs, err := filepath.Abs(filepath.Join("..", "..", "config", "flux"))
	if err != nil {
		t.Fatal(err)
	}
	component, err := filepath.Rel(root, abs)
	if err != nil {
		t.Fatal(err)
	}
	framework.WriteFile(t, filepath.Join(root, "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-components.yaml\n  - shard1\n  - shard2\ncomponents:\n  - "+component+"\n"+mainPatch)
	return resourceMaps(t, buildAsKustomizeController(t, root))
}

// selectorFlags are the --watch-label-selector arguments of the
// Deployment's manager container, in order; the last one is in effect.
func selectorFlags(deploy map[string]any) []string {
	containers, _, _ := unstructured.NestedSlice(deploy, "spec", "template", "spec", "containers")
	var flags []string
	for _, c := range containers {
		if c.(map[string]any)["name"] != "manager" {
			continue
		}
		for _, a := range c.(map[string]any)["args"].([]any) {
			if strings.HasPrefix(a.(string), "--watch-label-selector=") {
				flags = append(flags, a.(string))
			}
		}
	}
	return flags
}

// buildAsKustomizeController runs kustomize as kustomize-controller does:
// resources may come from outside the kustomization's root.
func buildAsKustomizeController(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = kustypes.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}
