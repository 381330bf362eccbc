package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// gadgetGroup is the group of the Gadget CRD of the dependsOn tests: a
// custom resource whose status a test writes as its operator would.
const gadgetGroup = "deps.e2e.afterhooks.io"

// gadgetCRD installs the namespaced Gadget CRD (status subresource, any
// spec and status) unless it is there, and waits until it is served. It
// stays for the cluster's life.
func gadgetCRD(t *testing.T) {
	t.Helper()
	open := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + gadgetGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gadgetGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: &open},
						"status": {Type: "object", XPreserveUnknownFields: &open},
					},
				}},
			}},
		},
	}
	if err := env.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating the Gadget CRD: %v", err)
	}
	env.Eventually(t, time.Minute, "the Gadget CRD served", func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gadgetGroup + "/v1")
		list.SetKind("GadgetList")
		return env.Client.List(ctx, list, client.InNamespace("default"))
	})
}

// setGadgetStatus writes the Gadget's status as its operator would: Ready
// of status ready for its current generation, and phase.
func setGadgetStatus(t *testing.T, g *unstructured.Unstructured, ready, phase string) {
	t.Helper()
	ctx := context.Background()
	if err := env.Get(ctx, g, g.GetNamespace(), g.GetName()); err != nil {
		t.Fatal(err)
	}
	g.Object["status"] = map[string]any{
		"observedGeneration": g.GetGeneration(),
		"phase":              phase,
		"conditions": []any{map[string]any{
			"type": "Ready", "status": ready, "reason": "Test", "message": "gadget is " + phase,
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": g.GetGeneration(),
		}},
	}
	if err := env.Client.Status().Update(ctx, g); err != nil {
		t.Fatalf("writing the Gadget's status: %v", err)
	}
}

// TestDependsOnAnyKind: entries of spec.dependsOn with a kind.
//
//   - "frontend" depends on the Gadget CRD (exists), a Gadget (ready:
//     true), the Deployment of the "backend" release (ready: true) and a
//     Secret (exists): it waits, naming each missing or unready one, and
//     installs once the last, the Deployment, is ready;
//   - "phased" waits for a readyExpr on the Gadget's status.phase;
//   - a kind the cluster does not serve is waited for, its message naming the reference;
//   - a tenant release whose ServiceAccount may not read the ConfigMap it
//     names stays Ready=False with "forbidden";
//   - a controller with --no-cross-namespace-refs refuses a Secret of
//     another namespace.
func TestDependsOnAnyKind(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	gadgetCRD(t)

	gadgetRef := func(name string, ready bool, expr string) v2.DependencyReference {
		return v2.DependencyReference{APIVersion: gadgetGroup + "/v1", Kind: "Gadget", Name: name, Ready: ready, ReadyExpr: expr}
	}
	frontend := env.PodinfoRelease(ns, "frontend", repo.Name, "")
	frontend.Spec.DependsOn = []v2.DependencyReference{
		{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "gadgets." + gadgetGroup},
		gadgetRef("main", true, ""),
		// The podinfo chart names the Deployment of release "backend" so.
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "backend-podinfo", Ready: true},
		{APIVersion: "v1", Kind: "Secret", Name: "creds"},
	}
	env.Create(t, frontend)
	phased := env.PodinfoRelease(ns, "phased", repo.Name, "")
	phased.Spec.DependsOn = []v2.DependencyReference{gadgetRef("main", false, "dep.status.phase == 'Up'")}
	env.Create(t, phased)

	gadget := fmt.Sprintf("%s/v1/Gadget/%s/main", gadgetGroup, ns)
	env.WaitNotReady(t, frontend, helmv2.DependencyNotReadyReason, fmt.Sprintf(
		"dependency '%s' not found; dependency 'apps/v1/Deployment/%s/backend-podinfo' not found; dependency 'v1/Secret/%s/creds' not found",
		gadget, ns, ns))
	if msg := conditions.GetMessage(frontend, meta.ReadyCondition); strings.Contains(msg, "CustomResourceDefinition") {
		t.Errorf("the existing CRD is named as unmet: %s", msg)
	}
	env.WaitNotReady(t, phased, helmv2.DependencyNotReadyReason, fmt.Sprintf("dependency '%s' not found", gadget))

	env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"}})
	g := &unstructured.Unstructured{}
	g.SetAPIVersion(gadgetGroup + "/v1")
	g.SetKind("Gadget")
	g.SetNamespace(ns)
	g.SetName("main")
	env.Create(t, g)
	setGadgetStatus(t, g, "False", "Starting")
	env.WaitNotReady(t, frontend, helmv2.DependencyNotReadyReason, fmt.Sprintf(
		"dependency '%s' is not ready: it is InProgress: gadget is Starting; dependency 'apps/v1/Deployment/%s/backend-podinfo' not found", gadget, ns))
	if msg := conditions.GetMessage(frontend, meta.ReadyCondition); strings.Contains(msg, "Secret") {
		t.Errorf("the Secret that exists is named as unmet: %s", msg)
	}
	env.WaitNotReady(t, phased, helmv2.DependencyNotReadyReason, fmt.Sprintf(
		"dependency '%s' is not ready: readyExpr 'dep.status.phase == 'Up'' evaluated to false", gadget))

	setGadgetStatus(t, g, "True", "Up")
	env.WaitRelease(t, phased, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	env.WaitNotReady(t, frontend, helmv2.DependencyNotReadyReason, fmt.Sprintf("dependency 'apps/v1/Deployment/%s/backend-podinfo' not found", ns))
	if msg := conditions.GetMessage(frontend, meta.ReadyCondition); strings.Contains(msg, "Gadget") {
		t.Errorf("the ready Gadget is named as unmet: %s", msg)
	}
	if n := len(env.Storage(t, ns, "frontend")); n != 0 {
		t.Fatalf("frontend was released (%d revisions) before its dependencies were met", n)
	}

	backend := env.PodinfoRelease(ns, "backend", repo.Name, "")
	env.Create(t, backend)
	env.WaitRelease(t, backend, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	env.WaitRelease(t, frontend, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 2 * time.Minute})

	t.Run("unknown kind", func(t *testing.T) {
		hr := env.PodinfoRelease(ns, "gizmo", repo.Name, "")
		hr.Spec.DependsOn = []v2.DependencyReference{{APIVersion: gadgetGroup + "/v1", Kind: "Gizmo", Name: "g"}}
		env.Create(t, hr)
		env.WaitNotReady(t, hr, helmv2.DependencyNotReadyReason, fmt.Sprintf(
			"dependency '%s/v1/Gizmo/%s/g' is not ready: the cluster serves no kind Gizmo in %s/v1 (yet)", gadgetGroup, ns, gadgetGroup))
		// Waited for, as a CRD another release installs may come.
		if conditions.IsTrue(hr, meta.StalledCondition) {
			t.Errorf("Stalled: %+v", conditions.Get(hr, meta.StalledCondition))
		}
	})

	t.Run("forbidden to the tenant", func(t *testing.T) {
		env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}})
		// The tenant may manage Helm storage and nothing else: the
		// ConfigMap exists, but not for it.
		env.ServiceAccount(t, ns, "tenant", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}})
		hr := env.PodinfoRelease(ns, "tenant", repo.Name, "")
		hr.Spec.ServiceAccountName = "tenant"
		hr.Spec.DependsOn = []v2.DependencyReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}}
		env.Create(t, hr)
		env.WaitNotReady(t, hr, helmv2.DependencyNotReadyReason, fmt.Sprintf(
			"dependency 'v1/ConfigMap/%s/settings' is not ready: reading it as ServiceAccount '%s/tenant' is forbidden: ", ns, ns))
		env.Consistently(t, 5*time.Second, "the tenant release stays waiting", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if conditions.IsTrue(hr, meta.ReadyCondition) || !strings.Contains(conditions.GetMessage(hr, meta.ReadyCondition), "forbidden") {
				return fmt.Errorf("Ready %s: %s", conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition))
			}
			return nil
		})
		if n := len(env.Storage(t, ns, "tenant")); n != 0 {
			t.Errorf("the tenant release was installed (%d revisions)", n)
		}
	})

	t.Run("no cross-namespace refs", func(t *testing.T) {
		ctl := env.StartShard(t, ns, framework.ControllerOptions{
			Shard: "deps-" + rand.String(8),
			Args:  []string{"--no-cross-namespace-refs=true"},
		})
		framework.EnsureRunning(t, ctl)
		hr := framework.Sharded(env.PodinfoRelease(ns, "elsewhere", repo.Name, ""), ctl)
		hr.Spec.DependsOn = []v2.DependencyReference{{APIVersion: "v1", Kind: "Secret", Namespace: "default", Name: "anything"}}
		env.Create(t, hr)
		env.WaitNotReady(t, hr, "InvalidDependency",
			"dependency 'v1/Secret/default/anything' is in another namespace than the HelmRelease while cross-namespace references are disabled (--no-cross-namespace-refs)")
		framework.MustRun(t, ctl)
	})
}
