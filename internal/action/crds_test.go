package action

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/resource"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// crdClient is a fake kube client that understands CRDs only: Build turns
// CustomResourceDefinition documents into resource infos (everything else
// builds to nothing, so Helm's own checks of chart objects are skipped),
// Create fails with AlreadyExists for the CRDs in existing, and every call
// that concerns CRDs is recorded.
type crdClient struct {
	kubefake.PrintingKubeClient
	existing  map[string]bool
	createErr error
	// buildAll builds every kind, not only CRDs.
	buildAll bool
	// labels are the labels of every object created or updated, by name.
	labels map[string]map[string]string

	mu        sync.Mutex
	created   []string
	updated   []string
	originals []string
	waited    []string
	strategy  kube.WaitStrategy
}

func newCRDClient(existing ...string) *crdClient {
	c := &crdClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, existing: map[string]bool{}}
	for _, e := range existing {
		c.existing[e] = true
	}
	return c
}

func (c *crdClient) Build(r io.Reader, _ bool) (kube.ResourceList, error) {
	var out kube.ResourceList
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		u := &unstructured.Unstructured{Object: doc}
		if u.GetKind() != "CustomResourceDefinition" && !c.buildAll {
			continue
		}
		out = append(out, &resource.Info{Name: u.GetName(), Object: u})
	}
}

func names(rl kube.ResourceList) []string {
	var out []string
	for _, i := range rl {
		out = append(out, i.Name)
	}
	sort.Strings(out)
	return out
}

func (c *crdClient) Create(rl kube.ResourceList, _ ...kube.ClientCreateOption) (*kube.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range rl {
		if c.createErr != nil {
			return nil, c.createErr
		}
		if c.existing[i.Name] {
			return nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, i.Name)
		}
	}
	c.created = append(c.created, names(rl)...)
	c.recordLabels(rl)
	return &kube.Result{Created: rl}, nil
}

func (c *crdClient) Update(orig, target kube.ResourceList, _ ...kube.ClientUpdateOption) (*kube.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updated = append(c.updated, names(target)...)
	c.originals = append(c.originals, names(orig)...)
	c.recordLabels(target)
	return &kube.Result{Updated: target}, nil
}

func (c *crdClient) recordLabels(rl kube.ResourceList) {
	if c.labels == nil {
		c.labels = map[string]map[string]string{}
	}
	for _, i := range rl {
		c.labels[i.Name] = i.Object.(*unstructured.Unstructured).GetLabels()
	}
}

func (c *crdClient) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return c.GetWaiterWithOptions(ws)
}

func (c *crdClient) GetWaiterWithOptions(ws kube.WaitStrategy, _ ...kube.WaitOption) (kube.Waiter, error) {
	return &crdWaiter{c: c, strategy: ws}, nil
}

type crdWaiter struct {
	kubefake.PrintingKubeWaiter
	c        *crdClient
	strategy kube.WaitStrategy
}

func (w *crdWaiter) Wait(rl kube.ResourceList, _ time.Duration) error {
	if len(rl) == 0 {
		return nil
	}
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	w.c.waited = append(w.c.waited, names(rl)...)
	w.c.strategy = w.strategy
	return nil
}

func (w *crdWaiter) WaitWithJobs(rl kube.ResourceList, d time.Duration) error { return w.Wait(rl, d) }

func (w *crdWaiter) WatchUntilReady(kube.ResourceList, time.Duration) error { return nil }

func (w *crdWaiter) WaitForDelete(kube.ResourceList, time.Duration) error { return nil }

// crdChart has two CRDs in one file and a subchart with a third one.
func crdChart() *chartv2.Chart {
	sub := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "sub", Version: "1.0.0"},
		Files:    []*common.File{{Name: "crds/gizmo.yaml", Data: []byte(crdYAML("gizmos", "Gizmo", "example.com", "1"))}},
	}
	c := testChart("1.0.0")
	c.Files = []*common.File{
		{Name: "crds/two.yaml", Data: []byte(crdYAML("widgets", "Widget", "example.com", "1") + "---\n" + crdYAML("gadgets", "Gadget", "example.com", "1"))},
		{Name: "crds/README.md", Data: []byte("not a manifest")},
	}
	c.SetDependencies(sub)
	return c
}

func TestApplyCRDs(t *testing.T) {
	all := []string{"gadgets.example.com", "gizmos.example.com", "widgets.example.com"}
	tests := []struct {
		name         string
		policy       helmv2.CRDsPolicy
		serverSide   bool
		wait         kube.WaitStrategy
		existing     []string
		createErr    error
		wantCreated  []string
		wantUpdated  []string
		wantWaited   []string
		wantStrategy kube.WaitStrategy
		wantErr      string
	}{
		{name: "Skip does nothing", policy: helmv2.Skip},
		{name: "Create creates all", policy: helmv2.Create, wait: kube.StatusWatcherStrategy,
			wantCreated: all, wantWaited: all, wantStrategy: kube.StatusWatcherStrategy},
		{name: "Create leaves existing CRDs alone", policy: helmv2.Create, wait: kube.LegacyStrategy,
			existing:    []string{"widgets.example.com"},
			wantCreated: []string{"gadgets.example.com", "gizmos.example.com"},
			wantWaited:  []string{"gadgets.example.com", "gizmos.example.com"}, wantStrategy: kube.LegacyStrategy},
		{name: "Create with everything present waits for nothing", policy: helmv2.Create, existing: all},
		{name: "Create fails on other errors", policy: helmv2.Create, createErr: errors.New("forbidden"), wantErr: "forbidden"},
		{name: "Create server-side applies all, existing ones too", policy: helmv2.Create, serverSide: true, wait: kube.StatusWatcherStrategy,
			existing:    []string{"widgets.example.com"},
			wantUpdated: all, wantWaited: all, wantStrategy: kube.StatusWatcherStrategy},
		{name: "CreateReplace applies all", policy: helmv2.CreateReplace, serverSide: true, wait: kube.StatusWatcherStrategy,
			existing:    []string{"widgets.example.com"},
			wantUpdated: all, wantWaited: all, wantStrategy: kube.StatusWatcherStrategy},
		{name: "hookOnly still waits for CRDs", policy: helmv2.CreateReplace, wait: kube.HookOnlyStrategy,
			wantUpdated: all, wantWaited: all, wantStrategy: kube.StatusWatcherStrategy},
		{name: "unknown policy", policy: "Merge", wantErr: "unknown CRD policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := newCRDClient(tt.existing...)
			kc.createErr = tt.createErr
			cfg := newFakeConfig(t, "flux", kc)
			err := applyCRDs(cfg, crdChart(), crdApply{policy: tt.policy, serverSide: tt.serverSide, wait: tt.wait})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(kc.created)
			sort.Strings(kc.waited)
			if !reflect.DeepEqual(kc.created, tt.wantCreated) {
				t.Errorf("created %v, want %v", kc.created, tt.wantCreated)
			}
			if !reflect.DeepEqual(kc.updated, tt.wantUpdated) {
				t.Errorf("updated %v, want %v", kc.updated, tt.wantUpdated)
			}
			if tt.wantUpdated != nil && !reflect.DeepEqual(kc.originals, tt.wantUpdated) {
				// The CRDs are their own originals, so Helm deletes nothing.
				t.Errorf("originals %v, want %v", kc.originals, tt.wantUpdated)
			}
			if !reflect.DeepEqual(kc.waited, tt.wantWaited) {
				t.Errorf("waited for %v, want %v", kc.waited, tt.wantWaited)
			}
			if kc.strategy != tt.wantStrategy {
				t.Errorf("wait strategy %q, want %q", kc.strategy, tt.wantStrategy)
			}
		})
	}
}

// Of a chart's crds/, as upstream applies them: those of a subchart its
// condition disables are left out, so are objects that are not CRDs, and
// every CRD applied carries the HelmRelease's origin labels.
func TestApplyCRDsOfEnabledSubchartsOnly(t *testing.T) {
	chrt := crdChart()
	chrt.Metadata.Dependencies = []*chartv2.Dependency{{Name: "sub", Version: "1.0.0", Condition: "sub.enabled"}}
	chrt.Files = append(chrt.Files, &common.File{Name: "crds/extra.yaml",
		Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-crd\n")})
	kc := newCRDClient()
	kc.buildAll = true
	origin := crdOrigin(newHR())
	err := applyCRDs(newFakeConfig(t, "flux", kc), chrt, crdApply{policy: helmv2.Create, serverSide: true,
		values: map[string]any{"sub": map[string]any{"enabled": false}}, origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"gadgets.example.com", "widgets.example.com"}; !reflect.DeepEqual(kc.updated, want) {
		t.Errorf("applied %v, want %v (no CRD of the disabled subchart, no ConfigMap)", kc.updated, want)
	}
	for name, labels := range kc.labels {
		for k, v := range origin {
			if labels[k] != v {
				t.Errorf("CRD %s labels %v, want %s=%s", name, labels, k, v)
			}
		}
	}
}

func TestApplyCRDsEmptyFile(t *testing.T) {
	c := testChart("1.0.0")
	c.Files = []*common.File{{Name: "crds/empty.yaml", Data: []byte("  \n")}}
	err := applyCRDs(newFakeConfig(t, "flux", newCRDClient()), c, crdApply{policy: helmv2.Create})
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("err = %v, want an empty-file error", err)
	}
}

// TestActionsApplyCRDsPerPolicy runs Install and Upgrade and checks that the
// CRD step follows the spec and that Helm does not create CRDs on its own.
func TestActionsApplyCRDsPerPolicy(t *testing.T) {
	all := []string{"gadgets.example.com", "gizmos.example.com", "widgets.example.com"}
	tests := []struct {
		name        string
		install     *helmv2.Install
		upgrade     *helmv2.Upgrade
		wantCreated []string
		wantUpdated []string
	}{
		// Both actions apply server-side here (Helm 4's default), so Create
		// applies every CRD, as upstream's server-side Create does.
		{name: "install default applies", wantUpdated: all},
		{name: "install skipCRDs is not read", install: &helmv2.Install{SkipCRDs: true}, wantUpdated: all},
		{name: "install Skip", install: &helmv2.Install{CRDs: helmv2.Skip}},
		{name: "install client-side creates", install: &helmv2.Install{ServerSideApply: new(bool)}, wantCreated: all},
		{name: "install CreateReplace", install: &helmv2.Install{CRDs: helmv2.CreateReplace}, wantUpdated: all},
		{name: "upgrade default applies", upgrade: &helmv2.Upgrade{}, wantUpdated: all},
		{name: "upgrade Skip", upgrade: &helmv2.Upgrade{CRDs: helmv2.Skip}},
		{name: "upgrade Create", upgrade: &helmv2.Upgrade{CRDs: helmv2.Create}, wantUpdated: all},
		{name: "upgrade CreateReplace", upgrade: &helmv2.Upgrade{CRDs: helmv2.CreateReplace}, wantUpdated: all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			kc := newCRDClient()
			cfg := newFakeConfig(t, "flux", kc)
			obj := newHR()
			if tt.upgrade != nil {
				// Install without CRDs first, then count the upgrade only.
				skip := newHR(withInstall(helmv2.Install{CRDs: helmv2.Skip}))
				if _, err := Install(ctx, cfg, skip, crdChart(), nil, planned(t, nil, skip, plan.Install, asked{})); err != nil {
					t.Fatal(err)
				}
				obj.Spec.Upgrade = &v2.Upgrade{Upgrade: *tt.upgrade}
				if _, err := Upgrade(ctx, cfg, obj, crdChart(), nil, planned(t, cfg, obj, plan.Upgrade, asked{})); err != nil {
					t.Fatal(err)
				}
			} else {
				if tt.install != nil {
					obj.Spec.Install = &v2.Install{Install: *tt.install}
				}
				if _, err := Install(ctx, cfg, obj, crdChart(), nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
					t.Fatal(err)
				}
			}
			sort.Strings(kc.created)
			if !reflect.DeepEqual(kc.created, tt.wantCreated) {
				t.Errorf("created %v, want %v", kc.created, tt.wantCreated)
			}
			if !reflect.DeepEqual(kc.updated, tt.wantUpdated) {
				t.Errorf("updated %v, want %v", kc.updated, tt.wantUpdated)
			}
		})
	}
}
