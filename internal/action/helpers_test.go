package action

import (
	"github.com/go-logr/logr"

	"io"
	"log/slog"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/testcharts"
)

// newHR returns a minimal HelmRelease "app" in namespace "flux" after
// applying mutators.
func newHR(mutators ...func(*v2.HelmRelease)) *v2.HelmRelease {
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "flux"}}
	obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
	for _, m := range mutators {
		m(obj)
	}
	return obj
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func ptr[T any](v T) *T { return &v }

func withInstall(in helmv2.Install) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.Install = &v2.Install{Install: in} }
}

func withUpgrade(up helmv2.Upgrade) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.Upgrade = &v2.Upgrade{Upgrade: up} }
}

func withRollback(rb helmv2.Rollback) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.Rollback = &v2.Rollback{Rollback: rb} }
}

func withUninstall(un helmv2.Uninstall) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.Uninstall = &v2.Uninstall{Uninstall: un} }
}

func withTest(te helmv2.Test) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.Test = &te }
}

func withTimeout(d time.Duration) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.Timeout = dur(d) }
}

func withWaitStrategy(n helmv2.WaitStrategyName) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: n} }
}

func withMaxHistory(n int) func(*v2.HelmRelease) {
	return func(o *v2.HelmRelease) { o.Spec.MaxHistory = &n }
}

// newFakeConfig returns a Helm configuration on the memory storage driver
// and kc (a PrintingKubeClient when nil), needing no cluster.
func newFakeConfig(t *testing.T, namespace string, kc kube.Interface) *helmaction.Configuration {
	t.Helper()
	if kc == nil {
		kc = &kubefake.PrintingKubeClient{Out: io.Discard, LogOutput: io.Discard}
	}
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.KubeClient = kc
	mem := driver.NewMemory()
	mem.SetNamespace(namespace)
	cfg.Releases = storage.Init(mem)
	cfg.Capabilities = common.DefaultCapabilities.Copy()
	cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	return cfg
}

const configMapTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  foo: {{ .Values.foo | quote }}
`

func hookTemplate(name, event string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
  annotations:
    "helm.sh/hook": ` + event + `
`
}

// testChart is a chart with one ConfigMap, a post-install hook and two test
// hooks, test-a and test-b.
func testChart(version string) *chartv2.Chart {
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "demo", Version: version},
		Values:   map[string]any{"foo": "default"},
		Templates: []*common.File{
			{Name: "templates/cm.yaml", Data: []byte(configMapTemplate)},
			{Name: "templates/post-install.yaml", Data: []byte(hookTemplate("post", "post-install"))},
			{Name: "templates/test-a.yaml", Data: []byte(hookTemplate("test-a", "test"))},
			{Name: "templates/test-b.yaml", Data: []byte(hookTemplate("test-b", "test"))},
		},
	}
}

// crdYAML is a namespaced CRD widgets.<group> of kind Widget with a label
// rev, so tests can tell which version of it is on the cluster.
func crdYAML(plural, kind, group, rev string) string {
	return testcharts.CRD(plural, kind, group, map[string]string{"rev": rev})
}

// withLogger sends Helm's logs (actions, kube client, storage) to logger.
func withLogger(logger logr.Logger) ConfigOption {
	return WithSlogHandler(logr.ToSlogHandler(logger))
}
