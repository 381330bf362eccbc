package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The FluxInstance patches of docs/install.md against the real Flux
// Operator (built from its Go module by `hack/tools/build.sh
// flux-operator`), running as a local process on a cluster of its own.
// The operator renders Flux from the distribution manifests its module
// carries, offline. Pods on kwok nodes run no containers, so each
// helm-controller the operator deploys is then run as a local process with
// the arguments and environment of the Deployment the operator applied.

const (
	fluxNamespace    = framework.LeaseNamespace
	fluxInstanceName = "flux"
	hrCRDName        = "helmreleases.helm.toolkit.fluxcd.io"
	// upstreamHelmControllerImage is what Flux v2.9.5 (the newest the
	// operator carries, which "2.x" resolves to) runs.
	upstreamHelmControllerImage = "ghcr.io/fluxcd/helm-controller:v1.6.4"
)

// TestFluxOperatorInstance installs Flux through a FluxInstance with the
// documented patches, runs a HelmRelease with afterHooks under our
// controller, then removes the patches as docs/install.md says to go back,
// and checks that upstream's controller and CRD return and that upstream
// keeps the release without a new Helm revision.
func TestFluxOperatorInstance(t *testing.T) {
	tools := framework.FluxOperator(t)
	c, cl := env.StartCluster(t, cluster.Options{Name: "fluxoperator", ExtraCRDDirs: []string{tools.CRDDir}})
	op := *env
	op.Cluster, op.Client = c, cl
	logs := t.TempDir()
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fluxNamespace}}); err != nil {
		t.Fatal(err)
	}
	framework.StartFluxOperator(t, tools, c.Kubeconfig(), filepath.Join(logs, "flux-operator.log"))

	image := "registry.example/team/helm-controller@sha256:" + fileDigest(t, env.Binary)
	if err := cl.Create(ctx, documentedFluxInstance(t, image)); err != nil {
		t.Fatalf("creating the FluxInstance: %v", err)
	}
	ours := waitFluxApplied(t, &op, image)
	checkServedCRD(t, cl, filepath.Join("..", "..", "config", "crd", "bases", "helm.toolkit.fluxcd.io_helmreleases.yaml"))

	ns := op.Namespace(t)
	repo := op.HelmRepository(t, ns)
	hr := framework.Release(ns, "podinfo", repo.Name, env.Podinfo.Name, env.Podinfo.Version, "")
	framework.WithWaitStrategy(hr, v2.AfterHooks, 2*time.Minute)
	controller := runAsDeployed(t, ours, env.Binary, c.Kubeconfig(), logs)
	op.Create(t, hr)
	op.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 3 * time.Minute})

	// Going back, step 1: our fields leave the HelmRelease while our
	// controller and CRD still run.
	op.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
		hr.Spec.Install.WaitStrategy = ""
		hr.Spec.Upgrade.WaitStrategy = ""
	})
	op.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: time.Minute})
	if err := controller.Stop(); err != nil {
		t.Fatalf("stopping our controller: %v", err)
	}

	// Step 2: the patches leave the FluxInstance.
	removeFluxInstancePatches(t, cl)
	upstream := waitFluxApplied(t, &op, upstreamHelmControllerImage)
	checkServedCRD(t, cl, filepath.Join(framework.ToolPath(t, "helm-controller-upstream-config"), "crd", "bases", "helm.toolkit.fluxcd.io_helmreleases.yaml"))
	if a, b := withoutImage(ours), withoutImage(upstream); !reflect.DeepEqual(a, b) {
		t.Errorf("the patches changed more of the pod template than the image:\n--- with them\n%s\n--- without\n%s", toYAML(t, a), toYAML(t, b))
	}

	// Out of a pod, upstream cannot elect a leader: controller-runtime
	// finds the Lease's namespace only in the pod's service account files
	// ("not running in-cluster, please specify LeaderElectionNamespace"),
	// and upstream has no flag for it. Ours reads RUNTIME_NAMESPACE.
	runAsDeployed(t, upstream, framework.UpstreamBinary(t), c.Kubeconfig(), logs, "--enable-leader-election=false")
	op.WaitReconcileHandled(t, hr, op.RequestReconcile(t, hr), 2*time.Minute)
	op.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: time.Minute})
	op.Consistently(t, 5*time.Second, "no new Helm revision under upstream", func(ctx context.Context) error {
		stored, err := op.ReadStorage(ctx, cl, ns, hr.Name)
		if err != nil {
			return err
		}
		if got := framework.Describe(stored); got != "[v1 deployed]" {
			return fmt.Errorf("Helm storage %s, want [v1 deployed]", got)
		}
		return nil
	})
}

// documentedFluxInstance is config/flux-operator/fluxinstance.yaml, the
// file docs/install.md tells users to merge, with the image set to image
// as the docs say to do until a release exists.
func documentedFluxInstance(t *testing.T, image string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "flux-operator", "fluxinstance.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const released = "image: ghcr.io/afterhooks/helm-controller:v0.1.0"
	if n := strings.Count(string(data), released); n != 1 {
		t.Fatalf("fluxinstance.yaml names %q %d times, want once", released, n)
	}
	data = []byte(strings.Replace(string(data), released, "image: "+image, 1))
	fi := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &fi.Object); err != nil {
		t.Fatal(err)
	}
	return fi
}

// removeFluxInstancePatches deletes spec.kustomize, as a user going back
// does.
func removeFluxInstancePatches(t *testing.T, cl client.Client) {
	t.Helper()
	fi := &unstructured.Unstructured{}
	fi.SetGroupVersionKind(framework.FluxInstanceGVK)
	fi.SetNamespace(fluxNamespace)
	fi.SetName(fluxInstanceName)
	patch := []byte(`{"spec":{"kustomize":null}}`)
	if err := cl.Patch(context.Background(), fi, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatalf("removing the FluxInstance's patches: %v", err)
	}
}

// waitFluxApplied waits until the operator reports the FluxInstance
// applied and its helm-controller Deployment's manager runs image (or
// image pinned by digest), and returns that Deployment.
func waitFluxApplied(t *testing.T, op *framework.Env, image string) *appsv1.Deployment {
	t.Helper()
	deploy := &appsv1.Deployment{}
	op.Eventually(t, 5*time.Minute, "the operator applies the FluxInstance", func(ctx context.Context) error {
		if _, err := framework.FluxInstanceApplied(ctx, op.Client, fluxNamespace, fluxInstanceName); err != nil {
			return err
		}
		if err := op.Get(ctx, deploy, fluxNamespace, "helm-controller"); err != nil {
			return err
		}
		// The operator pins Flux's own images by digest (from the
		// flux-images it carries): image@sha256:... is image.
		if got := manager(deploy).Image; got != image && !strings.HasPrefix(got, image+"@sha256:") {
			return fmt.Errorf("helm-controller's manager runs %s, want %s", got, image)
		}
		return nil
	})
	t.Logf("helm-controller Deployment: image %s, args %v", manager(deploy).Image, manager(deploy).Args)
	return deploy
}

// checkServedCRD fails t unless the served HelmRelease CRD has the schema
// of every version of the CRD file at path.
func checkServedCRD(t *testing.T, cl client.Client, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: hrCRDName}, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Versions) != len(want.Spec.Versions) {
		t.Fatalf("served CRD has %d versions, %s has %d", len(got.Spec.Versions), path, len(want.Spec.Versions))
	}
	for i, v := range want.Spec.Versions {
		if got.Spec.Versions[i].Name != v.Name || !reflect.DeepEqual(jsonNormal(t, got.Spec.Versions[i].Schema), jsonNormal(t, v.Schema)) {
			t.Errorf("served CRD version %s is not the one of %s", got.Spec.Versions[i].Name, path)
		}
	}
}

// runAsDeployed runs binary as the Deployment's manager container would:
// with its arguments (then extraArgs) and its environment, against the
// cluster of kubeconfig.
func runAsDeployed(t *testing.T, deploy *appsv1.Deployment, binary, kubeconfig, logDir string, extraArgs ...string) *framework.Controller {
	t.Helper()
	ctl, err := framework.StartController(framework.ControllerOptions{
		Binary: binary, Kubeconfig: kubeconfig, LogDir: logDir,
		Args: append(append([]string(nil), manager(deploy).Args...), extraArgs...), Env: containerEnv(t, deploy),
	})
	if err != nil {
		t.Fatal(err)
	}
	framework.LogsOnFailure(t, ctl)
	t.Cleanup(func() { _ = ctl.StopAll() })
	return ctl
}

// containerEnv is the manager container's environment as the kubelet
// would give it: plain values, and the pod's namespace where a field
// reference asks for it.
func containerEnv(t *testing.T, deploy *appsv1.Deployment) []string {
	t.Helper()
	var out []string
	for _, e := range manager(deploy).Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			out = append(out, e.Name+"="+deploy.Namespace)
		default:
			t.Logf("env %s: not resolved outside a pod, left unset", e.Name)
		}
	}
	return out
}

func manager(deploy *appsv1.Deployment) *corev1.Container {
	for i := range deploy.Spec.Template.Spec.Containers {
		if c := &deploy.Spec.Template.Spec.Containers[i]; c.Name == "manager" {
			return c
		}
	}
	return &corev1.Container{}
}

// withoutImage is the Deployment's pod template with the manager's image
// blanked.
func withoutImage(deploy *appsv1.Deployment) corev1.PodTemplateSpec {
	d := deploy.DeepCopy()
	manager(d).Image = ""
	return d.Spec.Template
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	data, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// fileDigest is the hex SHA-256 of the file at path.
func fileDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
