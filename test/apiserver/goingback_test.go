package apiserver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/test/upstreamcrd"
)

// The HelmReleases of a Git repository that uses every field this project
// adds to upstream's API.
func goingBackManifests(orderedName string) []*unstructured.Unstructured {
	afterHooks := helmRelease("uses-afterhooks", map[string]map[string]any{
		"install": {"waitStrategy": "afterHooks"}, "upgrade": {"waitStrategy": "afterHooks"},
	})
	ordered := helmRelease("uses-ordered", nil)
	_ = unstructured.SetNestedField(ordered.Object, orderedName, "spec", "waitStrategy", "name")
	hooks := helmRelease("uses-delete-hook-resources", map[string]map[string]any{"uninstall": {"deleteHookResources": true}})
	readiness := helmRelease("uses-readiness-timeout", nil)
	_ = unstructured.SetNestedField(readiness.Object, orderedName, "spec", "waitStrategy", "name")
	_ = unstructured.SetNestedField(readiness.Object, "2m", "spec", "waitStrategy", "readinessTimeout")
	deps := helmRelease("uses-dependson-kind", nil)
	_ = unstructured.SetNestedSlice(deps.Object, dependsOnAnyKind(), "spec", "dependsOn")
	all := []*unstructured.Unstructured{afterHooks, ordered, hooks, readiness, deps}
	for _, o := range all {
		o.SetNamespace("default")
	}
	return all
}

// apply server-side applies a manifest as kustomize-controller does.
func apply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	return c.Patch(ctx, obj.DeepCopy(), client.Apply, client.FieldOwner("kustomize-controller"), client.ForceOwnership)
}

// swapToUpstreamCRD replaces the served HelmRelease CRD's schema by
// upstream's, as removing the config/flux component does, and waits until
// the API server serves it (it prunes waitStrategy from a new object).
func swapToUpstreamCRD(ctx context.Context, t *testing.T, s *server) {
	t.Helper()
	up, err := upstreamcrd.Load(upstreamCRDPath)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := s.client.Get(ctx, client.ObjectKey{Name: up.Name}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec = up.Spec
	if err := s.client.Update(ctx, crd); err != nil {
		t.Fatalf("replacing our CRD by upstream's: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		probe := helmRelease(fmt.Sprintf("probe-%d", i), map[string]map[string]any{"install": {"waitStrategy": "afterHooks"}})
		probe.SetNamespace("default")
		err := s.client.Create(ctx, probe)
		if err == nil {
			_ = s.client.Delete(ctx, probe)
			if _, kept, _ := unstructured.NestedString(probe.Object, "spec", "install", "waitStrategy"); !kept {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server still serves our CRD 30s after the swap (last error %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func startWithOurCRD(t *testing.T, name string) *server {
	t.Helper()
	oursPath, err := upstreamcrd.OursPath()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServer(name, binDir, filepath.Dir(oursPath))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.env.Stop() })
	return s
}

// TestGoingBackToUpstream follows docs/install.md "Going back to upstream"
// on a real API server, with upstream's CRD replacing ours under objects
// that use every field we add, applied as kustomize-controller applies
// (server-side apply).
//
// In the wrong order (the component removed first), the next apply of the
// unchanged manifests fails for the fields upstream's schema does not
// declare (afterHooks, deleteHookResources), which stops the whole Flux
// Kustomization; `ordered` still passes on the object that already holds
// it (the API server ratchets unchanged values), but any new HelmRelease
// with it is refused. In the documented order (our fields removed from the
// manifests first, then the component) every apply succeeds.
func TestGoingBackToUpstream(t *testing.T) {
	ctx := context.Background()

	t.Run("component removed first: applies break", func(t *testing.T) {
		s := startWithOurCRD(t, "going back, wrong order")
		for _, o := range goingBackManifests("ordered") {
			if err := apply(ctx, s.client, o); err != nil {
				t.Fatalf("our CRD refused %s: %v", o.GetName(), err)
			}
		}
		swapToUpstreamCRD(ctx, t, s)
		wantRefused := map[string]string{
			"uses-afterhooks":            ".spec.install.waitStrategy: field not declared in schema",
			"uses-delete-hook-resources": ".spec.uninstall.deleteHookResources: field not declared in schema",
			"uses-readiness-timeout":     ".spec.waitStrategy.readinessTimeout: field not declared in schema",
			// Entries 1 to 3 hold fields upstream does not declare; the
			// API server names some of them, picked from maps it does not
			// sort: any may come.
			"uses-dependson-kind": unknownDependsOnFields(),
		}
		for _, o := range goingBackManifests("ordered") {
			err := apply(ctx, s.client, o)
			want, refused := wantRefused[o.GetName()]
			switch {
			case refused && err == nil:
				t.Errorf("upstream's CRD accepted the unchanged %s; want %q", o.GetName(), want)
			case refused && !containsOneOf(err.Error(), strings.Split(want, alternative)):
				t.Errorf("%s refused with %v; want %q", o.GetName(), err, want)
			case !refused && err != nil:
				t.Errorf("the unchanged %s (its ordered value already stored) was refused: %v", o.GetName(), err)
			}
		}
		fresh := goingBackManifests("ordered")[1]
		fresh.SetName("new-with-ordered")
		err := apply(ctx, s.client, fresh)
		if err == nil {
			t.Fatal("upstream's CRD accepted a new HelmRelease with spec.waitStrategy.name: ordered")
		}
		if !strings.Contains(err.Error(), "spec.waitStrategy.name") || !strings.Contains(err.Error(), `"ordered"`) {
			t.Errorf("the refusal does not name spec.waitStrategy.name and ordered: %v", err)
		}
	})

	t.Run("documented order: every apply succeeds", func(t *testing.T) {
		s := startWithOurCRD(t, "going back, documented order")
		for _, o := range goingBackManifests("ordered") {
			if err := apply(ctx, s.client, o); err != nil {
				t.Fatalf("our CRD refused %s: %v", o.GetName(), err)
			}
		}
		// Step 1: in Git, our fields are removed (ordered becomes poller,
		// upstream's default); Flux applies that while our CRD is served.
		for _, o := range upstreamOnly(goingBackManifests("poller")) {
			if err := apply(ctx, s.client, o); err != nil {
				t.Fatalf("step 1, %s: %v", o.GetName(), err)
			}
		}
		// Step 2: the component is removed; upstream's CRD is served and
		// the same manifests apply again.
		swapToUpstreamCRD(ctx, t, s)
		for _, o := range upstreamOnly(goingBackManifests("poller")) {
			if err := apply(ctx, s.client, o); err != nil {
				t.Errorf("step 2, re-applying %s under upstream's CRD: %v", o.GetName(), err)
			}
		}
		for _, o := range goingBackManifests("poller") {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			if err := s.client.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
				t.Fatal(err)
			}
			for _, path := range [][]string{
				{"spec", "install", "waitStrategy"}, {"spec", "upgrade", "waitStrategy"}, {"spec", "uninstall", "deleteHookResources"},
				{"spec", "waitStrategy", "readinessTimeout"},
			} {
				if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, path...); found {
					t.Errorf("%s: %s is still stored", o.GetName(), strings.Join(path, "."))
				}
			}
			if o.GetName() == "uses-dependson-kind" {
				deps, _, _ := unstructured.NestedSlice(got.Object, "spec", "dependsOn")
				want := []any{map[string]any{"name": "database", "readyExpr": "dep.status.observedGeneration > 0"}}
				if diff := cmp.Diff(want, deps); diff != "" {
					t.Errorf("uses-dependson-kind: stored spec.dependsOn (-want +got):\n%s", diff)
				}
			}
			if o.GetName() == "uses-ordered" {
				if v, _, _ := unstructured.NestedString(got.Object, "spec", "waitStrategy", "name"); v != "poller" {
					t.Errorf("uses-ordered: spec.waitStrategy.name = %q, want poller", v)
				}
			}
		}
	})
}

// upstreamOnly removes the fields upstream's API does not have, as the
// documented first step does in Git.
func upstreamOnly(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	for _, o := range objs {
		for _, action := range []string{"install", "upgrade", "rollback"} {
			unstructured.RemoveNestedField(o.Object, "spec", action, "waitStrategy")
		}
		unstructured.RemoveNestedField(o.Object, "spec", "uninstall", "deleteHookResources")
		unstructured.RemoveNestedField(o.Object, "spec", "waitStrategy", "readinessTimeout")
		// An entry with kind names no HelmRelease: under upstream it would
		// wait for a HelmRelease of that name forever, so it goes.
		if deps, found, _ := unstructured.NestedSlice(o.Object, "spec", "dependsOn"); found {
			var kept []any
			for _, d := range deps {
				if entry, _ := d.(map[string]any); entry["kind"] == nil {
					kept = append(kept, d)
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, kept, "spec", "dependsOn")
		}
		for _, action := range []string{"install", "upgrade", "rollback", "uninstall"} {
			if m, found, _ := unstructured.NestedMap(o.Object, "spec", action); found && len(m) == 0 {
				unstructured.RemoveNestedField(o.Object, "spec", action)
			}
		}
	}
	return objs
}

// alternative separates the messages of which one is wanted.
const alternative = " | "

// containsOneOf tells whether s contains one of wants.
func containsOneOf(s string, wants []string) bool {
	for _, w := range wants {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// unknownDependsOnFields lists, as alternatives, each field of
// dependsOnAnyKind's entries that upstream's schema does not declare, as
// the API server words its refusal.
func unknownDependsOnFields() string {
	var fields []string
	for i, entry := range dependsOnAnyKind() {
		for _, f := range []string{"apiVersion", "kind", "ready"} {
			if _, ok := entry.(map[string]any)[f]; ok {
				fields = append(fields, fmt.Sprintf(".spec.dependsOn[%d].%s: field not declared in schema", i, f))
			}
		}
	}
	return strings.Join(fields, alternative)
}
