package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/afterhooks/helm-controller/internal/crdguard"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The stand-in for Flux's rendered components: flux2's manifests (copied
// from its Go module by hack/tools/build.sh) with the helm-controller base's
// two release URLs, which cannot be reached here, replaced by files rendered
// from upstream helm-controller's own config/ (also from its Go module).
// It holds what `flux install --export` renders for helm-controller: the
// namespace, the controller, Flux's RBAC and network policies and labels.

var releaseAssetURL = regexp.MustCompile(`https://github\.com/fluxcd/helm-controller/releases/download/[^/]+/(helm-controller\.[a-z]+\.yaml)`)

// Registries Flux's images come from: upstream's, and a mirror as
// `flux bootstrap --registry` or an air-gapped install names it.
const (
	upstreamRegistry = "ghcr.io/fluxcd"
	mirrorRegistry   = "registry.mirror.example:5000/platform/fluxcd"
)

func kustomizeBuild(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}

func kustomizeYAML(t *testing.T, dir string) []byte {
	t.Helper()
	out, err := kustomizeBuild(t, dir).AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// prepareFluxManifests copies flux2's manifests into dir with the
// helm-controller base made buildable offline, and returns their path.
func prepareFluxManifests(t *testing.T, dir string) string {
	t.Helper()
	manifests := filepath.Join(dir, "flux2-manifests")
	if out, err := exec.Command("cp", "-r", framework.ToolPath(t, "flux2-manifests")+"/.", manifests).CombinedOutput(); err != nil {
		t.Fatalf("copying flux2's manifests: %v\n%s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", manifests).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	upstream := framework.ToolPath(t, "helm-controller-upstream-config")
	base := filepath.Join(manifests, "bases", "helm-controller")
	framework.WriteFile(t, filepath.Join(base, "helm-controller.crds.yaml"), string(kustomizeYAML(t, filepath.Join(upstream, "crd"))))
	framework.WriteFile(t, filepath.Join(base, "helm-controller.deployment.yaml"), string(kustomizeYAML(t, filepath.Join(upstream, "manager"))))
	k, err := os.ReadFile(filepath.Join(base, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(releaseAssetURL.FindAll(k, -1)); n != 2 {
		t.Fatalf("flux2's helm-controller base names %d release URLs, want 2:\n%s", n, k)
	}
	framework.WriteFile(t, filepath.Join(base, "kustomization.yaml"), releaseAssetURL.ReplaceAllString(string(k), "$1"))
	return manifests
}

// writeHelmControllerInstall writes, into manifests/<name>, the
// helm-controller part of manifests/install as `flux install` (or the Flux
// Operator) renders it, with Flux's images taken from registry, plus extra
// kustomization lines; it returns the directory.
func writeHelmControllerInstall(t *testing.T, manifests, name, registry, extra string) string {
	t.Helper()
	install := filepath.Join(manifests, name)
	for _, f := range []string{"namespace.yaml", "labels.yaml"} {
		data, err := os.ReadFile(filepath.Join(manifests, "install", f))
		if err != nil {
			t.Fatal(err)
		}
		framework.WriteFile(t, filepath.Join(install, f), string(data))
	}
	framework.WriteFile(t, filepath.Join(install, "kustomization.yaml"), `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: flux-system
resources:
  - namespace.yaml
  - ../bases/helm-controller
  - ../rbac
  - ../policies
transformers:
  - labels.yaml
images:
  - name: fluxcd/helm-controller
    newName: `+registry+`/helm-controller
`+extra)
	return install
}

// renderFluxStandIn writes the stand-in's gotk-components.yaml, with Flux's
// images from registry, into dir.
func renderFluxStandIn(t *testing.T, dir, registry string) string {
	t.Helper()
	install := writeHelmControllerInstall(t, prepareFluxManifests(t, dir), "standin", registry, "")
	out := filepath.Join(dir, "gotk-components.yaml")
	framework.WriteFile(t, out, string(kustomizeYAML(t, install)))
	return out
}

// fluxOverlays renders the stand-in (Flux's images from registry) as a
// bootstrap repository's flux-system/kustomization.yaml does: without and
// with our component, the latter with extra kustomization lines after it.
func fluxOverlays(t *testing.T, registry, extra string) (without, with resmap.ResMap) {
	t.Helper()
	dir := t.TempDir()
	components, err := os.ReadFile(renderFluxStandIn(t, dir, registry))
	if err != nil {
		t.Fatal(err)
	}
	// kustomize takes only relative paths to other kustomizations.
	abs, err := filepath.Abs(filepath.Join("..", "..", "config", "flux"))
	if err != nil {
		t.Fatal(err)
	}
	component, err := filepath.Rel(filepath.Join(dir, "with"), abs)
	if err != nil {
		t.Fatal(err)
	}
	plain := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - gotk-components.yaml\n"
	for _, d := range []string{"without", "with"} {
		framework.WriteFile(t, filepath.Join(dir, d, "gotk-components.yaml"), string(components))
	}
	framework.WriteFile(t, filepath.Join(dir, "without", "kustomization.yaml"), plain)
	framework.WriteFile(t, filepath.Join(dir, "with", "kustomization.yaml"), plain+"components:\n  - "+component+"\n"+extra)
	return kustomizeBuild(t, filepath.Join(dir, "without")), kustomizeBuild(t, filepath.Join(dir, "with"))
}

func resourceMaps(t *testing.T, m resmap.ResMap) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out[r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName()] = jsonNormal(t, obj).(map[string]any)
	}
	return out
}

const (
	deploymentKey = "Deployment/flux-system/helm-controller"
	crdKey        = "CustomResourceDefinition//" + crdguard.CRDName
	// ourImage is the image the component sets.
	ourImage = "ghcr.io/afterhooks/helm-controller:v0.1.0"
)

// managerImage is the image of the Deployment's manager container.
func managerImage(t *testing.T, deploy map[string]any) string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(deploy, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c.(map[string]any)["name"] == "manager" {
			return c.(map[string]any)["image"].(string)
		}
	}
	t.Fatalf("the Deployment has no manager container: %v", containers)
	return ""
}

// TestFluxComponentChangesOnlyImageAndCRD: over Flux's rendered
// helm-controller, config/flux changes the manager container's image and
// the CRD's schema, and nothing else: args, env, probes, labels, RBAC and
// network policies stay as Flux rendered them. The image is swapped
// whatever registry Flux's image comes from.
func TestFluxComponentChangesOnlyImageAndCRD(t *testing.T) {
	for _, registry := range []string{upstreamRegistry, mirrorRegistry} {
		t.Run(registry, func(t *testing.T) {
			without, with := fluxOverlays(t, registry, "")
			checkOnlyImageAndCRD(t, registry, resourceMaps(t, without), resourceMaps(t, with), ourImage)
		})
	}
}

// TestFluxComponentPinnedImage: the install path that works before a
// release. The image built and pushed here, pinned by digest after the
// component, replaces the component's image, and nothing else changes.
func TestFluxComponentPinnedImage(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	pin := "images:\n  - name: ghcr.io/afterhooks/helm-controller\n    newName: registry.example/team/helm-controller\n    digest: " + digest + "\n"
	without, with := fluxOverlays(t, mirrorRegistry, pin)
	checkOnlyImageAndCRD(t, mirrorRegistry, resourceMaps(t, without), resourceMaps(t, with), "registry.example/team/helm-controller@"+digest)
}

func checkOnlyImageAndCRD(t *testing.T, registry string, before, after map[string]map[string]any, wantImage string) {
	t.Helper()
	if len(before) < 10 {
		t.Fatalf("the stand-in has only %d objects; want the namespace, controller, RBAC and policies", len(before))
	}
	for key := range before {
		if _, ok := after[key]; !ok {
			t.Errorf("the component removed %s", key)
		}
	}
	for key := range after {
		if _, ok := before[key]; !ok {
			t.Errorf("the component added %s", key)
		}
	}
	for _, key := range []string{deploymentKey, crdKey} {
		if _, ok := before[key]; !ok {
			t.Fatalf("the stand-in has no %s", key)
		}
	}

	// The Deployment: only the manager's image differs.
	upstreamImage := managerImage(t, before[deploymentKey])
	if !strings.HasPrefix(upstreamImage, registry+"/helm-controller:v1.6.") {
		t.Errorf("the stand-in runs %q, want upstream's %s/helm-controller:v1.6.x", upstreamImage, registry)
	}
	if got := managerImage(t, after[deploymentKey]); got != wantImage {
		t.Errorf("with the component the image is %q, want %q", got, wantImage)
	}
	restored := runtime.DeepCopyJSON(after[deploymentKey])
	containers, _, _ := unstructured.NestedSlice(restored, "spec", "template", "spec", "containers")
	for _, c := range containers {
		if c.(map[string]any)["name"] == "manager" {
			c.(map[string]any)["image"] = upstreamImage
		}
	}
	if err := unstructured.SetNestedSlice(restored, containers, "spec", "template", "spec", "containers"); err != nil {
		t.Fatal(err)
	}
	after = maps.Clone(after)
	after[deploymentKey] = restored

	// The CRD: our schema, Flux's labels.
	ours := loadCRDMap(t, filepath.Join("..", "..", "config", "crd", "bases", "helm.toolkit.fluxcd.io_helmreleases.yaml"))
	if !reflect.DeepEqual(jsonNormal(t, after[crdKey]["spec"]), jsonNormal(t, ours["spec"])) {
		t.Errorf("with the component the CRD's spec is not ours")
	}
	if reflect.DeepEqual(jsonNormal(t, before[crdKey]["spec"]), jsonNormal(t, ours["spec"])) {
		t.Errorf("the stand-in already serves our CRD; the test proves nothing")
	}
	beforeLabels, _, _ := unstructured.NestedFieldNoCopy(before[crdKey], "metadata", "labels")
	afterLabels, _, _ := unstructured.NestedFieldNoCopy(after[crdKey], "metadata", "labels")
	if beforeLabels == nil || !reflect.DeepEqual(beforeLabels, afterLabels) {
		t.Errorf("CRD labels changed: %v → %v", beforeLabels, afterLabels)
	}

	for key, obj := range before {
		if key == crdKey {
			continue
		}
		if !reflect.DeepEqual(jsonNormal(t, obj), jsonNormal(t, after[key])) {
			a, _ := yaml.Marshal(obj)
			b, _ := yaml.Marshal(after[key])
			t.Errorf("the component changed %s beyond the image:\n--- before\n%s\n--- after\n%s", key, a, b)
		}
	}
}

// TestFluxInstancePatchesMatchComponent renders Flux the way the Flux
// Operator does (one kustomization over Flux's manifests, with its images
// and the FluxInstance's spec.kustomize.patches), using the patches of
// config/flux-operator/fluxinstance.yaml, and compares the result with the
// component's over `flux install`'s rendering: every object is the same.
func TestFluxInstancePatchesMatchComponent(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "flux-operator", "fluxinstance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var instance struct {
		Kind string `json:"kind"`
		Spec struct {
			Kustomize struct {
				Patches []map[string]any `json:"patches"`
			} `json:"kustomize"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &instance); err != nil {
		t.Fatal(err)
	}
	if instance.Kind != "FluxInstance" || len(instance.Spec.Kustomize.Patches) == 0 {
		t.Fatalf("fluxinstance.yaml is a %q with %d patches", instance.Kind, len(instance.Spec.Kustomize.Patches))
	}
	for _, p := range instance.Spec.Kustomize.Patches {
		if target, _ := p["target"].(map[string]any); target["namespace"] != nil {
			t.Errorf("patch target %v has a namespace; the Flux Operator refuses that", target)
		}
	}
	patches, err := yaml.Marshal(map[string]any{"patches": instance.Spec.Kustomize.Patches})
	if err != nil {
		t.Fatal(err)
	}

	for _, registry := range []string{upstreamRegistry, mirrorRegistry} {
		t.Run(registry, func(t *testing.T) {
			operator := writeHelmControllerInstall(t, prepareFluxManifests(t, t.TempDir()), "operator", registry, string(patches))
			got := resourceMaps(t, kustomizeBuild(t, operator))
			without, with := fluxOverlays(t, registry, "")
			want := resourceMaps(t, with)
			if len(got) != len(want) {
				t.Errorf("the FluxInstance renders %d objects, the component %d", len(got), len(want))
			}
			for key, obj := range want {
				if !reflect.DeepEqual(jsonNormal(t, obj), jsonNormal(t, got[key])) {
					a, _ := yaml.Marshal(obj)
					b, _ := yaml.Marshal(got[key])
					t.Errorf("%s differs:\n--- component\n%s\n--- FluxInstance\n%s", key, head(string(a), 60), head(string(b), 60))
				}
			}
			// And it is a swap, not a copy of Flux as it was.
			if managerImage(t, got[deploymentKey]) != ourImage || reflect.DeepEqual(resourceMaps(t, without)[crdKey], got[crdKey]) {
				t.Errorf("the FluxInstance patches did not swap the image and the CRD")
			}
		})
	}
}

func head(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = append(all[:lines], "...")
	}
	return strings.Join(all, "\n")
}

// jsonNormal gives a value the types of a JSON round trip, so numbers
// compare equal whichever decoder produced them.
func jsonNormal(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func loadCRDMap(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// TestFluxComponentOnCluster applies the stand-in's CRD to a cluster of its
// own: waitStrategy is pruned and the CRD guard of a running controller
// reports it; with the component's CRD the field survives a round trip and
// the guard notices without a restart.
func TestFluxComponentOnCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	without, with := fluxOverlays(t, upstreamRegistry, "")
	c, cl := env.StartCluster(t, cluster.Options{Name: "flux"})
	applyCRD(ctx, t, cl, crdFrom(t, without))

	hr := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("helm.toolkit.fluxcd.io/v2")
		u.SetKind("HelmRelease")
		u.SetNamespace("default")
		u.SetName(name)
		_ = unstructured.SetNestedMap(u.Object, map[string]any{
			"interval": "10m",
			"chart":    map[string]any{"spec": map[string]any{"chart": "podinfo", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "podinfo"}}},
			"install":  map[string]any{"waitStrategy": "afterHooks"},
			"upgrade":  map[string]any{"waitStrategy": "afterHooks"},
			"rollback": map[string]any{"waitStrategy": "afterHooks"},
			"suspend":  true,
		}, "spec")
		return u
	}
	roundTrip := func(name string) (map[string]string, error) {
		obj := hr(name)
		if err := cl.Create(ctx, obj); err != nil {
			return nil, err
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(obj.GroupVersionKind())
		if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return nil, err
		}
		kept := map[string]string{}
		for _, a := range []string{"install", "upgrade", "rollback"} {
			if v, ok, _ := unstructured.NestedString(got.Object, "spec", a, "waitStrategy"); ok {
				kept[a] = v
			}
		}
		return kept, nil
	}

	kept, err := roundTrip("pruned")
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 0 {
		t.Errorf("upstream's CRD kept waitStrategy %v; the test proves nothing", kept)
	}

	if err := cl.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "flux-system"},
	}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	p, err := framework.StartController(framework.ControllerOptions{Binary: env.Binary, Kubeconfig: c.Kubeconfig(), LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			p.DumpLogs(os.Stderr, 40)
		}
		_ = p.Stop()
	}()
	env.Eventually(t, time.Minute, "the guard reports upstream's CRD", func(ctx context.Context) error {
		if err := guardGauge(ctx, p.MetricsURL(), 0); err != nil {
			return err
		}
		return framework.LogContains(p.LogPath(), "afterHooks cannot take effect", "spec.install.waitStrategy", "kubectl explain helmrelease.spec.install.waitStrategy")
	})

	applyCRD(ctx, t, cl, crdFrom(t, with))
	env.Eventually(t, time.Minute, "the guard notices our CRD", func(ctx context.Context) error {
		if err := guardGauge(ctx, p.MetricsURL(), 1); err != nil {
			return err
		}
		return framework.LogContains(p.LogPath(), "has waitStrategy under install, upgrade and rollback")
	})
	env.Eventually(t, 30*time.Second, "waitStrategy survives a round trip", func(ctx context.Context) error {
		name := fmt.Sprintf("kept-%d", time.Now().UnixNano())
		kept, err := roundTrip(name)
		if err != nil {
			return err
		}
		want := map[string]string{"install": "afterHooks", "upgrade": "afterHooks", "rollback": "afterHooks"}
		if !reflect.DeepEqual(kept, want) {
			return fmt.Errorf("read back waitStrategy %v, want %v", kept, want)
		}
		return nil
	})
}

func crdFrom(t *testing.T, m resmap.ResMap) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	obj := resourceMaps(t, m)[crdKey]
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// applyCRD creates or replaces the CRD and waits until it is established.
func applyCRD(ctx context.Context, t *testing.T, cl client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	current := &apiextensionsv1.CustomResourceDefinition{}
	err := cl.Get(ctx, client.ObjectKey{Name: crd.Name}, current)
	switch {
	case apierrors.IsNotFound(err):
		err = cl.Create(ctx, crd)
	case err == nil:
		crd.ResourceVersion = current.ResourceVersion
		err = cl.Update(ctx, crd)
	}
	if err != nil {
		t.Fatalf("applying the CRD: %v", err)
	}
	env.Eventually(t, time.Minute, "the CRD is established", func(ctx context.Context) error {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := cl.Get(ctx, client.ObjectKey{Name: crd.Name}, got); err != nil {
			return err
		}
		if got.Generation != got.Status.ObservedGeneration && got.Status.ObservedGeneration != 0 {
			return fmt.Errorf("generation %d not observed yet", got.Generation)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not established")
	})
}

// guardGauge returns nil when the CRD guard's gauge on the metrics page
// at metricsURL is want.
func guardGauge(ctx context.Context, metricsURL string, want float64) error {
	page, err := framework.ScrapeContext(ctx, metricsURL)
	if err != nil {
		return err
	}
	got, ok, err := framework.MetricValue(page, crdguard.MetricName)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no %s on %s", crdguard.MetricName, metricsURL)
	}
	if got != want {
		return fmt.Errorf("%s = %v, want %v", crdguard.MetricName, got, want)
	}
	return nil
}
