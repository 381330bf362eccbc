// Package apiserver checks our HelmRelease CRD on a real kube-apiserver,
// side by side with upstream's CRD on a second one: what upstream accepts we
// accept and store identically, what upstream rejects we reject with the
// same message, and our waitStrategy and deleteHookResources fields are
// validated clearly. A third server holds the CRD of upstream's previous
// release (v1.6.5, Flux 2.9): every HelmRelease it accepts we accept too.
package apiserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/afterhooks/helm-controller/test/envtestserver"
	"github.com/afterhooks/helm-controller/test/upstreamcrd"
)

// server is one API server with one HelmRelease CRD installed.
type server struct {
	name   string
	env    *envtest.Environment
	client client.Client
}

var ours, upstream, previous *server

// binDir holds etcd and kube-apiserver; upstreamCRDPath is upstream's
// generated CRD, for tests that start a server of their own.
var binDir, upstreamCRDPath string

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if binDir, err = envtestserver.BinDir(); err != nil {
		return 0, err
	}
	upstreamDir, err := os.MkdirTemp("", "upstream-crd-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(upstreamDir)
	if upstreamCRDPath, err = upstreamcrd.Generate(upstreamDir); err != nil {
		return 0, err
	}
	previousDir, err := os.MkdirTemp("", "previous-crd-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(previousDir)
	if _, err := upstreamcrd.GenerateVersion(previousDir, upstreamcrd.PreviousVersion); err != nil {
		return 0, err
	}
	oursPath, err := upstreamcrd.OursPath()
	if err != nil {
		return 0, err
	}

	// Start the API servers at once; each takes a few seconds.
	var wg sync.WaitGroup
	var errOurs, errUpstream, errPrevious error
	wg.Add(3)
	go func() { defer wg.Done(); ours, errOurs = startServer("ours", binDir, filepath.Dir(oursPath)) }()
	go func() { defer wg.Done(); upstream, errUpstream = startServer("upstream", binDir, upstreamDir) }()
	go func() {
		defer wg.Done()
		previous, errPrevious = startServer("upstream "+upstreamcrd.PreviousVersion, binDir, previousDir)
	}()
	wg.Wait()
	defer func() {
		for _, s := range []*server{ours, upstream, previous} {
			if s != nil {
				_ = s.env.Stop()
			}
		}
	}()
	if err := errors.Join(errOurs, errUpstream, errPrevious); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func startServer(name, binDir, crdDir string) (*server, error) {
	crds, err := envtestserver.CRDs([]string{crdDir})
	if err != nil {
		return nil, err
	}
	env, cfg, err := envtestserver.Start(binDir, crds)
	if err != nil {
		return nil, fmt.Errorf("the %s API server: %w", name, err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("client for the %s API server: %w", name, err)
	}
	return &server{name: name, env: env, client: c}, nil
}

// loadObjects reads every HelmRelease document of a YAML file.
func loadObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no objects", path)
	}
	return objs
}

func samples(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in testdata/%s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		objs = append(objs, loadObjects(t, f)...)
	}
	return objs
}

// create submits a copy of obj into a fresh namespace-like scope: every
// object goes to "default" under a unique name per server.
func create(ctx context.Context, s *server, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	o := obj.DeepCopy()
	o.SetNamespace("default")
	if err := s.client.Create(ctx, o); err != nil {
		return nil, err
	}
	return o, nil
}

func cleanup(t *testing.T, objs ...*unstructured.Unstructured) {
	t.Cleanup(func() {
		for _, o := range objs {
			if o == nil {
				continue
			}
			for _, s := range []*server{ours, upstream, previous} {
				_ = s.client.Delete(context.Background(), o.DeepCopy())
			}
		}
	})
}

func TestUpstreamSamplesAcceptedAndStoredAlike(t *testing.T) {
	ctx := context.Background()
	for _, obj := range append(samples(t, "valid"), samples(t, "valid-v1.7")...) {
		t.Run(obj.GetName(), func(t *testing.T) {
			fromUpstream, err := create(ctx, upstream, obj)
			if err != nil {
				t.Fatalf("upstream's CRD rejects the sample, so it is not a valid sample: %v", err)
			}
			fromOurs, err := create(ctx, ours, obj)
			cleanup(t, fromUpstream, fromOurs)
			if err != nil {
				t.Fatalf("our CRD rejects a HelmRelease upstream accepts: %v", err)
			}
			// Defaults and pruning must leave the same spec behind.
			if diff := cmp.Diff(fromUpstream.Object["spec"], fromOurs.Object["spec"]); diff != "" {
				t.Errorf("stored spec differs from upstream's (-upstream +ours):\n%s", diff)
			}
		})
	}
}

// droppedDefaults are the fields upstream's previous CRD defaulted and
// v1.7's no longer does (the controller applies them): where a sample
// leaves them out, the previous server stores them and ours does not.
var droppedDefaults = [][]string{
	{"chart", "spec", "version"},
	{"chart", "spec", "reconcileStrategy"},
}

// TestPreviousUpstreamSamplesAccepted: every sample upstream's previous
// release accepts (testdata/valid holds only such) is accepted by ours and
// stored alike, but for the defaults v1.7 dropped.
func TestPreviousUpstreamSamplesAccepted(t *testing.T) {
	ctx := context.Background()
	for _, obj := range samples(t, "valid") {
		t.Run(obj.GetName(), func(t *testing.T) {
			fromPrevious, err := create(ctx, previous, obj)
			if err != nil {
				t.Fatalf("upstream %s rejects the sample, so it does not belong in testdata/valid: %v", upstreamcrd.PreviousVersion, err)
			}
			fromOurs, err := create(ctx, ours, obj)
			cleanup(t, fromPrevious, fromOurs)
			if err != nil {
				t.Fatalf("our CRD rejects a HelmRelease upstream %s accepts: %v", upstreamcrd.PreviousVersion, err)
			}
			want := fromPrevious.DeepCopy()
			for _, field := range droppedDefaults {
				path := append([]string{"spec"}, field...)
				if _, set, _ := unstructured.NestedFieldNoCopy(obj.Object, path...); !set {
					unstructured.RemoveNestedField(want.Object, path...)
				}
			}
			if diff := cmp.Diff(want.Object["spec"], fromOurs.Object["spec"]); diff != "" {
				t.Errorf("stored spec differs from upstream %s's, beyond the dropped defaults (-previous +ours):\n%s", upstreamcrd.PreviousVersion, diff)
			}
		})
	}
}

func TestUpstreamRejectionsKept(t *testing.T) {
	ctx := context.Background()
	for _, obj := range samples(t, "invalid") {
		t.Run(obj.GetName(), func(t *testing.T) {
			fromUpstream, errUpstream := create(ctx, upstream, obj)
			fromOurs, errOurs := create(ctx, ours, obj)
			cleanup(t, fromUpstream, fromOurs)
			if errUpstream == nil {
				t.Fatal("upstream's CRD accepts the sample, so it is not an invalid sample")
			}
			if !apierrors.IsInvalid(errUpstream) && !apierrors.IsBadRequest(errUpstream) {
				t.Fatalf("upstream failed for another reason than validation: %v", errUpstream)
			}
			if errOurs == nil {
				t.Fatalf("our CRD accepts what upstream rejects with: %v", errUpstream)
			}
			if diff := cmp.Diff(causes(errUpstream), withoutOurEnumValues(causes(errOurs))); diff != "" {
				t.Errorf("rejection differs (-upstream +ours):\n%s\nours:     %v\nupstream: %v", diff, errOurs, errUpstream)
			}
			t.Logf("rejected: %v", errOurs)
		})
	}
}

// ourEnumValues are the values our CRD adds to an upstream enum (see
// hack/crd-fixup), by field: the API server lists them among the supported
// values when it rejects another one, the only difference allowed there.
var ourEnumValues = map[string]string{
	"spec.waitStrategy.name": `, "ordered"`,
}

// withoutOurEnumValues removes ourEnumValues from rejection causes.
func withoutOurEnumValues(causes []string) []string {
	out := make([]string, len(causes))
	for i, c := range causes {
		out[i] = c
		for field, added := range ourEnumValues {
			if strings.HasPrefix(c, field+" FieldValueNotSupported") {
				out[i] = strings.Replace(c, added, "", 1)
			}
		}
	}
	return out
}

// causes lists the reason and every field error of an API error, sorted:
// the API server does not report several field errors in a stable order.
func causes(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return []string{err.Error()}
	}
	details := status.Status().Details
	out := []string{string(status.Status().Reason)}
	if details == nil {
		return append(out, status.Status().Message)
	}
	for _, c := range details.Causes {
		out = append(out, fmt.Sprintf("%s %s: %s", c.Field, c.Type, c.Message))
	}
	sort.Strings(out[1:])
	return out
}

func helmRelease(name string, actions map[string]map[string]any) *unstructured.Unstructured {
	spec := map[string]any{
		"interval": "5m",
		"chartRef": map[string]any{"kind": "OCIRepository", "name": "app"},
	}
	for action, fields := range actions {
		spec[action] = fields
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2",
		"kind":       "HelmRelease",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}
}

func TestWaitStrategyValidation(t *testing.T) {
	ctx := context.Background()
	const combinedMessage = "waitStrategy afterHooks cannot be combined with disableWait"
	for _, action := range []string{"install", "upgrade", "rollback"} {
		cases := []struct {
			name    string
			fields  map[string]any
			wantErr []string // substrings of the rejection; nil means accepted
		}{
			{name: "after-hooks", fields: map[string]any{"waitStrategy": "afterHooks"}},
			{name: "before-hooks", fields: map[string]any{"waitStrategy": "beforeHooks"}},
			{name: "before-hooks-no-wait", fields: map[string]any{"waitStrategy": "beforeHooks", "disableWait": true}},
			{name: "after-hooks-wait-enabled", fields: map[string]any{"waitStrategy": "afterHooks", "disableWait": false}},
			{name: "unknown", fields: map[string]any{"waitStrategy": "sometimes"}, wantErr: []string{
				"spec." + action + ".waitStrategy", `Unsupported value: "sometimes"`, `supported values: "beforeHooks", "afterHooks"`,
			}},
			{name: "wrong-case", fields: map[string]any{"waitStrategy": "AfterHooks"}, wantErr: []string{
				"spec." + action + ".waitStrategy", `Unsupported value: "AfterHooks"`,
			}},
			{name: "after-hooks-no-wait", fields: map[string]any{"waitStrategy": "afterHooks", "disableWait": true}, wantErr: []string{
				"spec." + action, combinedMessage,
			}},
		}
		for _, tc := range cases {
			t.Run(action+"/"+tc.name, func(t *testing.T) {
				obj := helmRelease(action+"-"+tc.name, map[string]map[string]any{action: tc.fields})
				stored, err := create(ctx, ours, obj)
				cleanup(t, stored)
				if tc.wantErr == nil {
					if err != nil {
						t.Fatalf("rejected: %v", err)
					}
					got, _, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", action, "waitStrategy")
					if got != tc.fields["waitStrategy"] {
						t.Errorf("stored waitStrategy %v, want %v", got, tc.fields["waitStrategy"])
					}
					return
				}
				if err == nil {
					t.Fatal("accepted, want a rejection")
				}
				if !apierrors.IsInvalid(err) {
					t.Errorf("want an Invalid error, got %v", err)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("rejection %q does not mention %q", err, want)
					}
				}
				t.Logf("rejected: %v", err)
			})
		}
	}
}

// TestUpstreamServerIgnoresWaitStrategy documents what happens when one of
// our manifests meets upstream's CRD: the field is pruned, nothing fails.
// Together with the samples above this is the whole compatibility story:
// manifests move both ways.
func TestUpstreamServerIgnoresWaitStrategy(t *testing.T) {
	ctx := context.Background()
	obj := helmRelease("pruned", map[string]map[string]any{"install": {"waitStrategy": "afterHooks", "timeout": "3m"}})
	stored, err := create(ctx, upstream, obj)
	cleanup(t, stored)
	if err != nil {
		t.Fatalf("upstream rejected one of our manifests: %v", err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "install", "waitStrategy"); found {
		t.Error("upstream's CRD kept waitStrategy; expected it to be pruned")
	}
	if timeout, _, _ := unstructured.NestedString(stored.Object, "spec", "install", "timeout"); timeout != "3m" {
		t.Errorf("install.timeout = %q after pruning, want 3m", timeout)
	}
}

// TestDeleteHookResources checks spec.uninstall.deleteHookResources on both
// servers: ours stores it beside upstream's uninstall fields (and still
// defaults deletionPropagation), rejects a value that is not a boolean, and
// upstream's CRD prunes it like waitStrategy, keeping the rest.
func TestDeleteHookResources(t *testing.T) {
	ctx := context.Background()
	uninstall := map[string]any{"deleteHookResources": true, "keepHistory": true}

	t.Run("ours-stores-it", func(t *testing.T) {
		stored, err := create(ctx, ours, helmRelease("delete-hooks", map[string]map[string]any{"uninstall": uninstall}))
		cleanup(t, stored)
		if err != nil {
			t.Fatalf("rejected: %v", err)
		}
		got, _, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "uninstall")
		want := map[string]any{"deleteHookResources": true, "keepHistory": true, "deletionPropagation": "background"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stored spec.uninstall (-want +got):\n%s", diff)
		}
	})

	t.Run("ours-rejects-a-string", func(t *testing.T) {
		obj := helmRelease("delete-hooks-string", map[string]map[string]any{"uninstall": {"deleteHookResources": "yes"}})
		stored, err := create(ctx, ours, obj)
		cleanup(t, stored)
		if err == nil {
			t.Fatal("accepted, want a rejection")
		}
		if !strings.Contains(err.Error(), "spec.uninstall.deleteHookResources") {
			t.Errorf("rejection %q does not name spec.uninstall.deleteHookResources", err)
		}
	})

	t.Run("upstream-prunes-it", func(t *testing.T) {
		stored, err := create(ctx, upstream, helmRelease("delete-hooks-pruned", map[string]map[string]any{"uninstall": uninstall}))
		cleanup(t, stored)
		if err != nil {
			t.Fatalf("upstream rejected one of our manifests: %v", err)
		}
		got, _, _ := unstructured.NestedFieldNoCopy(stored.Object, "spec", "uninstall")
		want := map[string]any{"keepHistory": true, "deletionPropagation": "background"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("spec.uninstall stored by upstream's CRD (-want +got):\n%s", diff)
		}
	})
}

// dependsOnAnyKind is a spec.dependsOn with every field of an entry: one
// HelmRelease entry as upstream writes it, and entries naming a
// Deployment, a cluster-scoped CRD and a custom resource by kind.
func dependsOnAnyKind() []any {
	return []any{
		map[string]any{"name": "database", "readyExpr": "dep.status.observedGeneration > 0"},
		map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "api", "namespace": "backend", "ready": true},
		map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "name": "widgets.example.com"},
		map[string]any{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "readyExpr": "dep.status.phase == 'Up'"},
	}
}

// TestDependsOnAnyKind checks apiVersion, kind and ready on spec.dependsOn
// entries on both servers: ours stores them as given beside name,
// namespace and readyExpr, rejects a ready that is not a boolean, and
// upstream's CRD prunes them like waitStrategy, keeping the rest of each
// entry (which then names a HelmRelease for upstream).
func TestDependsOnAnyKind(t *testing.T) {
	ctx := context.Background()
	withDeps := func(name string, deps []any) *unstructured.Unstructured {
		obj := helmRelease(name, nil)
		if err := unstructured.SetNestedSlice(obj.Object, deps, "spec", "dependsOn"); err != nil {
			t.Fatal(err)
		}
		return obj
	}

	t.Run("ours-stores-it", func(t *testing.T) {
		stored, err := create(ctx, ours, withDeps("depends-any", dependsOnAnyKind()))
		cleanup(t, stored)
		if err != nil {
			t.Fatalf("rejected: %v", err)
		}
		got, _, _ := unstructured.NestedSlice(stored.Object, "spec", "dependsOn")
		if diff := cmp.Diff(dependsOnAnyKind(), got); diff != "" {
			t.Errorf("stored spec.dependsOn (-want +got):\n%s", diff)
		}
	})

	t.Run("ours-rejects-a-string-ready", func(t *testing.T) {
		stored, err := create(ctx, ours, withDeps("depends-string-ready", []any{
			map[string]any{"apiVersion": "v1", "kind": "Secret", "name": "s", "ready": "yes"},
		}))
		cleanup(t, stored)
		if err == nil {
			t.Fatal("accepted, want a rejection")
		}
		if !strings.Contains(err.Error(), "spec.dependsOn[0].ready") {
			t.Errorf("rejection %q does not name spec.dependsOn[0].ready", err)
		}
	})

	t.Run("upstream-prunes-it", func(t *testing.T) {
		stored, err := create(ctx, upstream, withDeps("depends-any-pruned", dependsOnAnyKind()))
		cleanup(t, stored)
		if err != nil {
			t.Fatalf("upstream rejected one of our manifests: %v", err)
		}
		got, _, _ := unstructured.NestedSlice(stored.Object, "spec", "dependsOn")
		want := []any{
			map[string]any{"name": "database", "readyExpr": "dep.status.observedGeneration > 0"},
			map[string]any{"name": "api", "namespace": "backend"},
			map[string]any{"name": "widgets.example.com"},
			map[string]any{"name": "w", "readyExpr": "dep.status.phase == 'Up'"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("spec.dependsOn stored by upstream's CRD (-want +got):\n%s", diff)
		}
	})
}
