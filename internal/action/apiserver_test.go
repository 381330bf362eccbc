package action

import (
	"context"
	"fmt"
	"sync"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasecommon "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// The tests in this file run against a real kube-apiserver and etcd
// (envtest), started once on first use from the project's tool cache
// (test/cluster.ToolBinDir). A missing binary fails the tests.

// sharedAPIServer is started on first use and stopped by TestMain.
var sharedAPIServer envtestserver.Shared

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }

// apiServer and createNamespaces are the shared harness under the names the
// package's tests use.
var (
	apiServer        = sharedAPIServer.Config
	createNamespaces = envtestserver.CreateNamespaces
)

// countingDriver counts the release records written through it.
type countingDriver struct {
	driver.Driver
	mu      sync.Mutex
	creates int
}

func (d *countingDriver) Create(key string, rls releasecommon.Releaser) error {
	d.mu.Lock()
	d.creates++
	d.mu.Unlock()
	return d.Driver.Create(key, rls)
}

func (d *countingDriver) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.creates
}

func cmChart(version string) *chartv2.Chart {
	return &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "web", Version: version},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(configMapTemplate)}},
	}
}

// fieldOwner returns the operation under which manager owns fields of
// the object, or "" when it owns none.
func fieldOwner(mf []metav1.ManagedFieldsEntry, manager string) metav1.ManagedFieldsOperationType {
	for _, e := range mf {
		if e.Manager == manager {
			return e.Operation
		}
	}
	return ""
}

// hasFieldOperation reports whether manager owns fields of the object
// through operation op.
func hasFieldOperation(mf []metav1.ManagedFieldsEntry, manager string, op metav1.ManagedFieldsOperationType) bool {
	for _, e := range mf {
		if e.Manager == manager && e.Operation == op {
			return true
		}
	}
	return false
}

func TestAgainstAPIServerReleaseLifecycle(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "store-ns", "apps-ns", "flux-system")

	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name          string
		hrName        string
		opts          asked
		wantOperation metav1.ManagedFieldsOperationType
		wantMethod    releasev1.ApplyMethod
	}{
		{name: "Helm 4 defaults", hrName: "web", wantOperation: metav1.ManagedFieldsOperationApply, wantMethod: releasev1.ApplyMethodServerSideApply},
		{name: "Helm 3 defaults", hrName: "legacy", opts: asked{config: Config{UseHelm3Defaults: true}}, wantOperation: metav1.ManagedFieldsOperationUpdate, wantMethod: releasev1.ApplyMethodClientSideApply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := newHR(func(o *v2.HelmRelease) {
				o.Name, o.Namespace = tt.hrName, "flux-system"
				o.Spec.TargetNamespace = "apps-ns"
				o.Spec.StorageNamespace = "store-ns"
				// force takes the replace path client-side and the
				// forced-conflicts path server-side; Helm rejects a wrong pair.
				o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Force: true}}
				o.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{Force: true}}
			})
			up := obj.Upstream()
			name := v2.ReleaseName(obj)
			counter := &countingDriver{}
			cfg, err := factory.Build(up.GetStorageNamespace(), up.GetReleaseNamespace(),
				withLogger(testr.New(t)),
				WithStorageDriver(func(d driver.Driver) driver.Driver { counter.Driver = d; return counter }))
			if err != nil {
				t.Fatal(err)
			}

			rel, err := Install(ctx, cfg, obj, cmChart("1.0.0"), map[string]any{"foo": "one"}, planned(t, nil, obj, plan.Install, tt.opts))
			if err != nil {
				t.Fatalf("install: %v", err)
			}
			if rel.ApplyMethod != string(tt.wantMethod) {
				t.Errorf("apply method %q, want %q", rel.ApplyMethod, tt.wantMethod)
			}
			if counter.count() == 0 {
				t.Error("the storage driver wrapper was not used")
			}
			if _, err := cs.CoreV1().Secrets("store-ns").Get(ctx, "sh.helm.release.v1."+name+".v1", metav1.GetOptions{}); err != nil {
				t.Errorf("release record not in the storage namespace: %v", err)
			}
			cm, err := cs.CoreV1().ConfigMaps("apps-ns").Get(ctx, name+"-cm", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("chart object not in the target namespace: %v", err)
			}
			if cm.Data["foo"] != "one" {
				t.Errorf("configmap data %v", cm.Data)
			}
			if op := fieldOwner(cm.ManagedFields, DefaultFieldManager); op != tt.wantOperation {
				t.Errorf("field manager %q owns fields with operation %q, want %q (managedFields %+v)", DefaultFieldManager, op, tt.wantOperation, cm.ManagedFields)
			}

			if _, err := Upgrade(ctx, cfg, obj, cmChart("1.1.0"), map[string]any{"foo": "two"}, planned(t, cfg, obj, plan.Upgrade, tt.opts)); err != nil {
				t.Fatalf("upgrade with force: %v", err)
			}
			if cm, err = cs.CoreV1().ConfigMaps("apps-ns").Get(ctx, name+"-cm", metav1.GetOptions{}); err != nil || cm.Data["foo"] != "two" {
				t.Fatalf("after upgrade: %v %v", cm.Data, err)
			}

			if err := Rollback(ctx, cfg, obj, 0, planned(t, cfg, obj, plan.Rollback, tt.opts)); err != nil {
				t.Fatalf("rollback with force: %v", err)
			}
			if cm, err = cs.CoreV1().ConfigMaps("apps-ns").Get(ctx, name+"-cm", metav1.GetOptions{}); err != nil || cm.Data["foo"] != "one" {
				t.Fatalf("after rollback: %v %v", cm.Data, err)
			}
			last, err := LastRelease(cfg, name)
			if err != nil || last.Version != 3 || last.ApplyMethod != string(tt.wantMethod) {
				t.Fatalf("last release after rollback: %+v %v", last, err)
			}

			if _, err := Uninstall(ctx, cfg, obj, planned(t, cfg, obj, plan.Uninstall, tt.opts)); err != nil {
				t.Fatalf("uninstall: %v", err)
			}
			if _, err := cs.CoreV1().ConfigMaps("apps-ns").Get(ctx, name+"-cm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("configmap after uninstall: err = %v, want not found", err)
			}
			secrets, err := cs.CoreV1().Secrets("store-ns").List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
			if err != nil || len(secrets.Items) != 0 {
				t.Errorf("release records after uninstall: %d (%v)", len(secrets.Items), err)
			}
		})
	}
}

func crdChartVersion(rev string, crds map[string]string, templates ...*common.File) *chartv2.Chart {
	c := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "crds", Version: "1.0." + rev},
		Templates: templates,
	}
	for file, data := range crds {
		c.Files = append(c.Files, &common.File{Name: "crds/" + file, Data: []byte(data)})
	}
	return c
}

const widgetTemplate = `apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
spec:
  size: 3
`

func TestAgainstAPIServerCRDPolicies(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	ext := apiextensions.NewForConfigOrDie(restCfg)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "crd-apps")

	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	build := func() *helmaction.Configuration {
		cfg, err := factory.Build("crd-apps", "crd-apps", withLogger(testr.New(t)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	crd := func(name string) *apiextensionsv1.CustomResourceDefinition {
		t.Helper()
		c, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	inject := func(name string) {
		t.Helper()
		patch := fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":%q,"annotations":{"injected":"yes"}}}`, name)
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, name, types.ApplyPatchType, []byte(patch),
			metav1.PatchOptions{FieldManager: "injector"}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("server-side release", func(t *testing.T) {
		widgets := "widgets.example.com"
		v1 := crdChartVersion("1", map[string]string{"widgets.yaml": crdYAML("widgets", "Widget", "example.com", "1")},
			&common.File{Name: "templates/widget.yaml", Data: []byte(widgetTemplate)})
		obj := newHR(func(o *v2.HelmRelease) { o.Name, o.Namespace = "widgets", "crd-apps" })

		// Install (Create by default) must create the CRD before the chart's
		// Widget is built, so the discovery refresh is exercised too.
		if _, err := Install(ctx, build(), obj, v1, nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
			t.Fatalf("install: %v", err)
		}
		if got := crd(widgets).Labels["rev"]; got != "1" {
			t.Fatalf("CRD rev %q after install, want 1", got)
		}
		gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
		if _, err := dyn.Resource(gvr).Namespace("crd-apps").Get(ctx, "w1", metav1.GetOptions{}); err != nil {
			t.Fatalf("the chart's Widget: %v", err)
		}
		inject(widgets)

		// Each step brings the CRD at revision rev. Server-side, Create
		// (the default of both actions, as upstream) applies it over the
		// existing CRD, as upstream's server-side Create does.
		steps := []struct {
			policy       helmv2.CRDsPolicy
			rev, wantRev string
		}{
			{policy: helmv2.Skip, rev: "2", wantRev: "1"},
			{policy: "", rev: "2", wantRev: "2"},
			{policy: helmv2.Create, rev: "3", wantRev: "3"},
			{policy: helmv2.CreateReplace, rev: "4", wantRev: "4"},
		}
		for _, st := range steps {
			next := crdChartVersion(st.rev, map[string]string{"widgets.yaml": crdYAML("widgets", "Widget", "example.com", st.rev)},
				&common.File{Name: "templates/widget.yaml", Data: []byte(widgetTemplate)})
			o := obj.DeepCopy()
			o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CRDs: st.policy}}
			if _, err := Upgrade(ctx, build(), o, next, nil, planned(t, build(), o, plan.Upgrade, asked{})); err != nil {
				t.Fatalf("upgrade with CRD policy %q: %v", st.policy, err)
			}
			c := crd(widgets)
			if c.Labels["rev"] != st.wantRev {
				t.Errorf("policy %q: CRD rev %q, want %q", st.policy, c.Labels["rev"], st.wantRev)
			}
			// Server-side apply leaves another manager's fields alone.
			if c.Annotations["injected"] != "yes" {
				t.Errorf("policy %q: injected annotation lost: %v", st.policy, c.Annotations)
			}
			if c.Labels["helm.toolkit.fluxcd.io/name"] != "widgets" || c.Labels["helm.toolkit.fluxcd.io/namespace"] != "crd-apps" {
				t.Errorf("policy %q: CRD labels %v, want the origin labels of the HelmRelease", st.policy, c.Labels)
			}
			if st.wantRev != "1" && !hasFieldOperation(c.ManagedFields, DefaultFieldManager, metav1.ManagedFieldsOperationApply) {
				t.Errorf("policy %q: not server-side applied by %s (managedFields %+v)", st.policy, DefaultFieldManager, c.ManagedFields)
			}
		}
	})

	t.Run("client-side release", func(t *testing.T) {
		gadgets := "gadgets.example.com"
		// Someone else created the CRD first.
		var pre apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(crdYAML("gadgets", "Gadget", "example.com", "0")), &pre); err != nil {
			t.Fatal(err)
		}
		pre.Annotations = map[string]string{"injected": "yes"}
		if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &pre, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		chart := crdChartVersion("1", map[string]string{"gadgets.yaml": crdYAML("gadgets", "Gadget", "example.com", "1")})
		obj := newHR(func(o *v2.HelmRelease) { o.Name, o.Namespace = "gadgets", "crd-apps" })
		opts := asked{config: Config{UseHelm3Defaults: true}}

		if _, err := Install(ctx, build(), obj, chart, nil, planned(t, nil, obj, plan.Install, opts)); err != nil {
			t.Fatalf("install: %v", err)
		}
		if c := crd(gadgets); c.Labels["rev"] != "0" || c.Annotations["injected"] != "yes" {
			t.Fatalf("Create touched an existing CRD: labels %v annotations %v", c.Labels, c.Annotations)
		}

		o := obj.DeepCopy()
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CRDs: helmv2.CreateReplace}}
		if _, err := Upgrade(ctx, build(), o, chart, nil, planned(t, build(), o, plan.Upgrade, opts)); err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		c := crd(gadgets)
		if c.Labels["rev"] != "1" {
			t.Errorf("CreateReplace client-side: CRD rev %q, want 1", c.Labels["rev"])
		}
		// Client-side, CreateReplace replaces the whole object.
		if _, ok := c.Annotations["injected"]; ok {
			t.Errorf("CreateReplace client-side kept a foreign annotation: %v", c.Annotations)
		}
	})
}
