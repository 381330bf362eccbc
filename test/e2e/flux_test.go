package e2e

import (
	"context"
	"encoding/json"
	"fmt"
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

// renderFluxStandIn writes the stand-in's gotk-components.yaml into dir.
func renderFluxStandIn(t *testing.T, dir string) string {
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

	// The helm-controller part of manifests/install, as `flux install` has it.
	install := filepath.Join(manifests, "standin")
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
    newName: ghcr.io/fluxcd/helm-controller
`)
	out := filepath.Join(dir, "gotk-components.yaml")
	framework.WriteFile(t, out, string(kustomizeYAML(t, install)))
	return out
}

// fluxOverlays renders the stand-in as a bootstrap repository's
// flux-system/kustomization.yaml does: without and with our component.
func fluxOverlays(t *testing.T) (without, with resmap.ResMap) {
	t.Helper()
	dir := t.TempDir()
	components, err := os.ReadFile(renderFluxStandIn(t, dir))
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
	framework.WriteFile(t, filepath.Join(dir, "with", "kustomization.yaml"), plain+"components:\n  - "+component+"\n")
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
		out[r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName()] = obj
	}
	return out
}

const (
	deploymentKey = "Deployment/flux-system/helm-controller"
	crdKey        = "CustomResourceDefinition//" + crdguard.CRDName
)

// TestFluxComponentChangesOnlyImageAndCRD: over Flux's rendered
// helm-controller, config/flux changes the container image and the CRD's
// schema, and nothing else: args, env, probes, labels, RBAC and network
// policies stay as Flux rendered them.
func TestFluxComponentChangesOnlyImageAndCRD(t *testing.T) {
	without, with := fluxOverlays(t)
	before, after := resourceMaps(t, without), resourceMaps(t, with)
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

	// The Deployment: only the image differs.
	manager := func(obj map[string]any) map[string]any {
		c, _, _ := unstructured.NestedFieldNoCopy(obj, "spec", "template", "spec", "containers")
		return c.([]any)[0].(map[string]any)
	}
	image := func(obj map[string]any) string { return manager(obj)["image"].(string) }
	if got := image(before[deploymentKey]); !strings.HasPrefix(got, "ghcr.io/fluxcd/helm-controller:v1.6.") {
		t.Errorf("the stand-in runs %q, want upstream's ghcr.io/fluxcd/helm-controller:v1.6.x", got)
	}
	if got, want := image(after[deploymentKey]), "ghcr.io/afterhooks/helm-controller:v0.1.0"; got != want {
		t.Errorf("with the component the image is %q, want %q", got, want)
	}
	manager(after[deploymentKey])["image"] = image(before[deploymentKey])

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
		if !reflect.DeepEqual(obj, after[key]) {
			a, _ := yaml.Marshal(obj)
			b, _ := yaml.Marshal(after[key])
			t.Errorf("the component changed %s beyond the image:\n--- before\n%s\n--- after\n%s", key, a, b)
		}
	}
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
	without, with := fluxOverlays(t)
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
