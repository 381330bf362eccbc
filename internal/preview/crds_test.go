package preview_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

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
	dyn := dynamic.NewForConfigOrDie(e.rest)
	widgets := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if _, err := dyn.Resource(widgets).Namespace(e.ns).Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the install did not create the Widget the plan named: %v", err)
	}
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
