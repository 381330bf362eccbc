package preview_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/test/testcharts"
)

// A chart that ships a CRD in crds/ and a custom resource of it in its
// templates (operators' default instances, alerting rules) installs: Helm
// installs crds/ before it renders. A plan cannot install the CRD, and
// Helm's server dry run cannot map a kind the API server does not serve
// yet; the plan still names the install and every object it creates, says
// what it rendered without the server, and the install does what it said.
func TestPreviewOfAnInstallWithTheChartsCRDs(t *testing.T) {
	e := newEnv(t, nil)
	group := strings.ReplaceAll(e.ns, "-", "") + ".example.com"
	chrt := func() *chartv2.Chart { return crdChart(group) }
	obj := e.hr()

	pv := e.preview(obj, chrt(), values("a", "1"))
	if pv.Step != reconcile.StepInstall || len(pv.Actions) != 1 {
		t.Fatalf("preview: step %s with %d actions, want one install", pv.Step, len(pv.Actions))
	}
	create := names(pv.Actions[0].Objects.Create)
	slices.Sort(create)
	if want := []string{"ConfigMap/app", "Widget/default"}; !slices.Equal(create, want) {
		t.Errorf("objects to create %v, want %v", create, want)
	}
	if !slices.ContainsFunc(pv.NotShown, func(s string) bool { return strings.Contains(s, "Widget") }) {
		t.Errorf("the plan does not say it rendered the Widget kind without the API server: %q", pv.NotShown)
	}

	e.reconcile(obj, chrt, values("a", "1"))
	wantWidget(t, e, group, "install")
}

// crdChart is a chart with the CRD of kind Widget in group in crds/ and a
// Widget and a ConfigMap in its templates.
func crdChart(group string) *chartv2.Chart {
	c := testChart("1.0.0", configMap("app"),
		fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: default\nspec:\n  size: 1\n", group))
	crd := testcharts.CRD("widgets", "Widget", group, nil)
	c.Files = append(c.Files, &common.File{Name: "crds/widgets.yaml", Data: []byte(crd)})
	return c
}

// The CRD step of an upgrade, as the action takes it (upstream's rules):
// by default the chart's CRDs are applied server-side, so a CRD the new
// chart changes is planned as updated and one it leaves alone as
// unchanged; crds: Skip plans nothing; and the upgrade then does what the
// plan said.
func TestPreviewOfTheCRDStepOfAnUpgrade(t *testing.T) {
	e := newEnv(t, nil)
	group := strings.ReplaceAll(e.ns, "-", "") + ".example.com"
	withCRD := func(labels map[string]string) func() *chartv2.Chart {
		return func() *chartv2.Chart {
			c := testChart("1.0.0", configMap("app"))
			c.Files = append(c.Files, &common.File{Name: "crds/gizmos.yaml", Data: []byte(testcharts.CRD("gizmos", "Gizmo", group, labels))})
			return c
		}
	}
	obj := e.hr()
	e.reconcile(obj, withCRD(nil), values("a", "1"))

	crdStep := func(obj *v2.HelmRelease, chrt *chartv2.Chart) *action.CRDPlan {
		t.Helper()
		pv := e.preview(obj, chrt, values("a", "2"))
		if pv.Step != reconcile.StepUpgrade || len(pv.Actions) != 1 {
			t.Fatalf("preview: step %s with %d actions, want one upgrade", pv.Step, len(pv.Actions))
		}
		return pv.Actions[0].CRDs
	}
	name := "gizmos." + group
	if got := crdStep(obj, withCRD(nil)()); got == nil || got.Policy != helmv2.Create || !got.ServerSide ||
		!slices.Equal(got.Changes, []action.CRDChange{{Name: name, Change: action.CRDUnchanged}}) {
		t.Errorf("the same CRD: %+v, want it unchanged under Create, server-side", got)
	}
	changed := withCRD(map[string]string{"tier": "2"})
	if got := crdStep(obj, changed()); got == nil || !slices.Equal(got.Changes, []action.CRDChange{{Name: name, Change: action.CRDUpdate}}) {
		t.Errorf("a changed CRD: %+v, want it updated", got)
	}
	skip := obj.DeepCopy()
	skip.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CRDs: helmv2.Skip}}
	if got := crdStep(skip, changed()); got != nil {
		t.Errorf("crds Skip: %+v, want no CRD step", got)
	}

	e.reconcile(obj, changed, values("a", "2"))
	crd, err := apiextensions.NewForConfigOrDie(e.rest).ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || crd.Labels["tier"] != "2" {
		t.Errorf("after the upgrade the CRD has labels %v (%v), want the update the plan named", crd.Labels, err)
	}
}

// An upgrade to a chart version that adds a CRD to crds/ and a custom
// resource of it to its templates: the upgrade applies the CRD before it
// renders (upstream's default policy, Create, for upgrades too). The plan
// cannot, so it renders without the server, as for an install, names the
// new resource to create and the CRD step, and the upgrade does what it
// said.
func TestPreviewOfAnUpgradeAddingACRDKind(t *testing.T) {
	e := newEnv(t, nil)
	group := strings.ReplaceAll(e.ns, "-", "") + ".example.com"
	obj := e.hr()
	e.reconcile(obj, func() *chartv2.Chart { return testChart("1.0.0", configMap("app")) }, values("a", "1"))

	chrt := func() *chartv2.Chart {
		c := crdChart(group)
		c.Metadata.Version = "1.1.0"
		return c
	}
	pv := e.preview(obj, chrt(), values("a", "1"))
	if pv.Step != reconcile.StepUpgrade || len(pv.Actions) != 1 {
		t.Fatalf("preview: step %s with %d actions, want one upgrade", pv.Step, len(pv.Actions))
	}
	up := pv.Actions[0]
	if create := names(up.Objects.Create); !slices.Equal(create, []string{"Widget/default"}) {
		t.Errorf("objects to create %v, want [Widget/default]", create)
	}
	if up.CRDs == nil || !slices.Equal(up.CRDs.Changes, []action.CRDChange{{Name: "widgets." + group, Change: action.CRDCreate}}) {
		t.Errorf("CRD step %+v, want widgets.%s created", up.CRDs, group)
	}
	if !slices.Equal(up.RenderedWithoutServer, []string{"Widget." + group}) {
		t.Errorf("rendered without the server: %v, want the Widget kind", up.RenderedWithoutServer)
	}

	e.reconcile(obj, chrt, values("a", "1"))
	wantWidget(t, e, group, "upgrade")
}

// wantWidget fails t unless the Widget "default" of group, which the plan
// named, exists after the action.
func wantWidget(t *testing.T, e *env, group, action string) {
	t.Helper()
	dyn := dynamic.NewForConfigOrDie(e.rest)
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := dyn.Resource(widgets).Namespace(e.ns).Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the %s did not create the Widget the plan named: %v", action, err)
	}
}
