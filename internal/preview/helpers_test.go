package preview_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/runner"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

var apiServer envtestserver.Shared

func TestMain(m *testing.M) { apiServer.Main(m) }

// env is one test's namespace on the shared API server.
type env struct {
	t       testing.TB
	ns      string
	rest    *rest.Config
	cs      kubernetes.Interface
	factory *action.ConfigFactory
	// settings are the runner's; the hook order is beforeHooks unless
	// set.
	settings runner.Settings
}

var nsCount int

func newEnv(t testing.TB, wrap func(rest.Config) *rest.Config) *env {
	t.Helper()
	cfg := apiServer.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	nsCount++
	ns := fmt.Sprintf("preview-%d-%d", time.Now().UnixNano()%100000, nsCount)
	envtestserver.CreateNamespaces(t, cs, ns)
	if wrap != nil {
		cfg = wrap(*cfg)
	}
	factory, err := action.NewConfigFactoryFromRESTConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ns: ns, rest: cfg, cs: cs, factory: factory}
}

// hr is a HelmRelease named web in the env's namespace.
func (e *env) hr(mutators ...func(*v2.HelmRelease)) *v2.HelmRelease {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns, Generation: 1}}
	obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
	obj.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	for _, m := range mutators {
		m(obj)
	}
	return obj
}

func (e *env) runner(obj *v2.HelmRelease) *runner.Runner {
	e.t.Helper()
	s := e.settings
	if s.DefaultHookOrder == "" {
		s.DefaultHookOrder = v2.BeforeHooks
	}
	r, err := runner.New(e.factory, nil, obj, s)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// preview previews the next reconcile of obj to the chart and values.
func (e *env) preview(obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any) *preview.Preview {
	e.t.Helper()
	pv, err := preview.Compute(context.Background(), preview.Input{
		Object: obj.DeepCopy(), Chart: chrt, Values: values, Helm: e.runner(obj.DeepCopy()),
	})
	if err != nil {
		e.t.Fatalf("preview: %v", err)
	}
	return pv
}

// reconcile runs the state machine once, as the controller does, over a
// runner of obj, and leaves obj's status as the reconcile left it.
func (e *env) reconcile(obj *v2.HelmRelease, chrt func() *chartv2.Chart, values map[string]any) {
	e.t.Helper()
	if failure := e.reconcileMayFail(obj, chrt, values); failure != "" {
		e.t.Fatalf("reconcile: %s", failure)
	}
}

// reconcileMayFail runs the state machine once, as reconcile does, and
// returns the message of a failed action ("" when it succeeded).
func (e *env) reconcileMayFail(obj *v2.HelmRelease, chrt func() *chartv2.Chart, values map[string]any) string {
	e.t.Helper()
	m := &reconcile.Machine{Helm: e.runner(obj)}
	// The controller records where the release is stored before the
	// state machine runs.
	obj.Status.StorageNamespace = obj.GetStorageNamespace()
	req := &reconcile.Request{Object: obj, ReleaseName: v2.ReleaseName(obj), Chart: chart{chrt},
		Values: values, ConfigDigest: chartutil.DigestValues(digest.Canonical, values).String()}
	if err := m.Run(context.Background(), req); err != nil {
		return err.Error()
	}
	return ""
}

type chart struct{ load func() *chartv2.Chart }

func (c chart) Metadata() *chartv2.Metadata   { return c.load().Metadata }
func (c chart) Load() (*chartv2.Chart, error) { return c.load(), nil }

// testChart is a chart named web of version with the given templates.
func testChart(version string, templates ...string) *chartv2.Chart {
	c := &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "web", Version: version, APIVersion: chartv2.APIVersionV2}}
	for i, t := range templates {
		c.Templates = append(c.Templates, &common.File{Name: fmt.Sprintf("templates/t%d.yaml", i), Data: []byte(t)})
	}
	return c
}

// configMap is a template of a ConfigMap with the values under data.
func configMap(name string, annotations ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n", name)
	if len(annotations) > 0 {
		b.WriteString("  annotations:\n")
		for i := 0; i+1 < len(annotations); i += 2 {
			fmt.Fprintf(&b, "    %s: %q\n", annotations[i], annotations[i+1])
		}
	}
	b.WriteString("data:\n{{- range $k, $v := .Values.data }}\n  {{ $k }}: {{ $v | quote }}\n{{- end }}\n")
	return b.String()
}

// hook is a ConfigMap hook for event with weight and delete policy.
func hook(name, event string, weight int, policy string) string {
	a := []string{"helm.sh/hook", event, "helm.sh/hook-weight", fmt.Sprint(weight)}
	if policy != "" {
		a = append(a, "helm.sh/hook-delete-policy", policy)
	}
	return configMap(name, a...)
}

func names(objs []preview.Object) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.Kind+"/"+o.Name)
	}
	return out
}

func hookNames(hooks []preview.Hook) []string {
	out := []string{}
	for _, h := range hooks {
		out = append(out, fmt.Sprintf("%s:%s:%d", h.Phase, h.Name, h.Weight))
	}
	return out
}
