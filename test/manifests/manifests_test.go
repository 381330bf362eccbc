// Package manifests checks the deployable manifests under config/ keep
// upstream's object names, so a kustomize patch on `flux install` output can
// swap upstream's helm-controller for this one.
package manifests

import (
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func build(t *testing.T) resmap.ResMap {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "config", "default"))
	if err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	return m
}

func TestDefaultKustomizationBuilds(t *testing.T) {
	m := build(t)
	want := map[string]string{
		"Namespace/flux-system": "",
		"CustomResourceDefinition/helmreleases.helm.toolkit.fluxcd.io": "",
		"ServiceAccount/helm-controller":                               "flux-system",
		"Deployment/helm-controller":                                   "flux-system",
		"ClusterRole/helm-controller-manager":                          "",
		"ClusterRoleBinding/helm-controller-manager":                   "",
		"Role/helm-controller-leader-election":                         "flux-system",
	}
	got := map[string]string{}
	for _, r := range m.Resources() {
		got[r.GetKind()+"/"+r.GetName()] = r.GetNamespace()
	}
	for key, ns := range want {
		gotNS, ok := got[key]
		if !ok {
			t.Errorf("%s missing from config/default; have %v", key, got)
			continue
		}
		if gotNS != ns {
			t.Errorf("%s in namespace %q, want %q", key, gotNS, ns)
		}
	}
}

func TestDeploymentMatchesUpstreamNames(t *testing.T) {
	m := build(t)
	var deploy appsv1.Deployment
	found := false
	for _, r := range m.Resources() {
		if r.GetKind() != "Deployment" {
			continue
		}
		obj, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &deploy); err != nil {
			t.Fatal(err)
		}
		found = true
	}
	if !found {
		t.Fatal("no Deployment in config/default")
	}
	if deploy.Spec.Template.Spec.ServiceAccountName != "helm-controller" {
		t.Errorf("serviceAccountName %q, want helm-controller", deploy.Spec.Template.Spec.ServiceAccountName)
	}
	if deploy.Spec.Selector.MatchLabels["app"] != "helm-controller" {
		t.Errorf("selector %v, want app=helm-controller", deploy.Spec.Selector.MatchLabels)
	}
	containers := deploy.Spec.Template.Spec.Containers
	if len(containers) != 1 || containers[0].Name != "manager" {
		t.Fatalf("want one container named manager, got %+v", containers)
	}
	ports := map[string]int32{}
	for _, p := range containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http-prom"] != 8080 || ports["healthz"] != 9440 {
		t.Errorf("ports %v, want http-prom 8080 and healthz 9440", ports)
	}
	c := containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.String() != "healthz" {
		t.Errorf("readiness probe %+v, want GET /readyz on healthz", c.ReadinessProbe)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Port.String() != "healthz" {
		t.Errorf("liveness probe %+v, want GET /healthz on healthz", c.LivenessProbe)
	}
}
