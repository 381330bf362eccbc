package afterhooks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
)

// run runs act through Start and its finish, as the action layer does.
func run(ctx context.Context, cfg *helmaction.Configuration, a Action, act func(*helmaction.Configuration) (*releasev1.Release, error)) (*releasev1.Release, error) {
	c, finish, err := Start(ctx, cfg, a)
	if err != nil {
		return nil, err
	}
	return finish(act(c))
}

const (
	relName   = "app"
	relNS     = "apps"
	waitLimit = 3 * time.Minute
)

// fixedNow is the clock of every wrapper in these tests.
var fixedNow = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func clock() time.Time { return fixedNow }

// testChart has one ConfigMap and one post hook for install, upgrade and
// rollback.
func testChart(version string) *chartv2.Chart {
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "demo", Version: version},
		Values:   map[string]any{"foo": "default"},
		Templates: []*common.File{
			{Name: "templates/cm.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-cm
data:
  foo: {{ .Values.foo | quote }}
`)},
			{Name: "templates/post.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: post
  annotations:
    "helm.sh/hook": post-install,post-upgrade,post-rollback
`)},
		},
	}
}

// env is a fake cluster: a Helm storage driver and a fake kube client whose
// errors tests set.
type env struct {
	d  driver.Driver
	kc *kubefake.FailingKubeClient
}

func newKubeClient() *kubefake.FailingKubeClient {
	return &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard, LogOutput: io.Discard}}
}

// newMemEnv stores releases with Helm's memory driver.
func newMemEnv() *env {
	mem := driver.NewMemory()
	mem.SetNamespace(relNS)
	return &env{d: mem, kc: newKubeClient()}
}

// newSecretsEnv stores releases as Secrets in a fake clientset; cs lets a
// test open a second driver on the same Secrets, as a restarted controller
// would.
func newSecretsEnv() (*env, *k8sfake.Clientset) {
	cs := k8sfake.NewClientset()
	return &env{d: newSecretsDriver(cs), kc: newKubeClient()}, cs
}

func newSecretsDriver(cs *k8sfake.Clientset) *driver.Secrets {
	d := driver.NewSecrets(cs.CoreV1().Secrets(relNS))
	d.SetLogger(slog.DiscardHandler)
	return d
}

// envKinds are the storage drivers scenario tests run on.
var envKinds = map[string]func() *env{
	"memory":  newMemEnv,
	"secrets": func() *env { e, _ := newSecretsEnv(); return e },
}

// config returns a Helm configuration writing through d (e.d when nil) and
// pruning to maxHistory revisions.
func (e *env) config(d driver.Driver, maxHistory int) *helmaction.Configuration {
	if d == nil {
		d = e.d
	}
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.KubeClient = e.kc
	st := storage.Init(d)
	st.SetLogger(slog.DiscardHandler)
	st.MaxHistory = maxHistory
	cfg.Releases = st
	cfg.Capabilities = common.DefaultCapabilities.Copy()
	cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	return cfg
}

// actionOpts are the knobs of the actions these tests run.
type actionOpts struct {
	afterHooks    bool // hookOnly wait, as afterHooks runs Helm
	maxHistory    int
	cleanupOnFail bool
	replace       bool
	labels        map[string]string
	toVersion     int // rollback
}

func waitStrategyOf(o actionOpts) kube.WaitStrategy {
	if o.afterHooks {
		return kube.HookOnlyStrategy
	}
	return kube.StatusWatcherStrategy
}

func (e *env) install(d driver.Driver, o actionOpts) error {
	in := helmaction.NewInstall(e.config(d, o.maxHistory))
	in.ReleaseName = relName
	in.Namespace = relNS
	in.Timeout = time.Minute
	in.WaitStrategy = waitStrategyOf(o)
	in.WaitForJobs = true
	in.Replace = o.replace
	in.Labels = o.labels
	_, err := in.Run(testChart("1.0.0"), map[string]any{"foo": "install"})
	return err
}

func (e *env) upgrade(d driver.Driver, o actionOpts) error {
	up := helmaction.NewUpgrade(e.config(d, o.maxHistory))
	up.Namespace = relNS
	up.Timeout = time.Minute
	up.WaitStrategy = waitStrategyOf(o)
	up.WaitForJobs = true
	up.MaxHistory = o.maxHistory
	up.CleanupOnFail = o.cleanupOnFail
	up.Labels = o.labels
	up.ResetValues = true
	_, err := up.Run(relName, testChart("2.0.0"), map[string]any{"foo": "upgrade"})
	return err
}

func (e *env) rollback(d driver.Driver, o actionOpts) error {
	rb := helmaction.NewRollback(e.config(d, o.maxHistory))
	rb.Version = o.toVersion
	rb.Timeout = time.Minute
	rb.WaitStrategy = waitStrategyOf(o)
	rb.WaitForJobs = true
	rb.MaxHistory = o.maxHistory
	rb.CleanupOnFail = o.cleanupOnFail
	return rb.Run(relName)
}

func (e *env) uninstallKeepHistory() error {
	un := helmaction.NewUninstall(e.config(nil, 0))
	un.KeepHistory = true
	un.WaitStrategy = kube.HookOnlyStrategy
	_, err := un.Run(relName)
	return err
}

// history reads every revision of the test release from d, by version.
func history(t *testing.T, d driver.Driver) map[int]*releasev1.Release {
	t.Helper()
	items, err := d.Query(map[string]string{"name": relName, "owner": "helm"})
	if err != nil {
		t.Fatalf("query history: %v", err)
	}
	out := map[int]*releasev1.Release{}
	for _, it := range items {
		rel, err := toV1(it)
		if err != nil {
			t.Fatal(err)
		}
		out[rel.Version] = rel
	}
	return out
}

// statuses renders the history as "v1=deployed v2=pending-upgrade".
func statuses(t *testing.T, d driver.Driver) string {
	t.Helper()
	h := history(t, d)
	vs := make([]int, 0, len(h))
	for v := range h {
		vs = append(vs, v)
	}
	sort.Ints(vs)
	s := ""
	for i, v := range vs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("v%d=%s", v, h[v].Info.Status)
	}
	return s
}

func mustGet(t *testing.T, d driver.Driver, version int) *releasev1.Release {
	t.Helper()
	it, err := d.Get(releaseKey(relName, version))
	if err != nil {
		t.Fatalf("get v%d: %v", version, err)
	}
	rel, err := toV1(it)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// hookPhase returns the LastRun phase of the post hook of rel.
func hookPhase(rel *releasev1.Release) releasev1.HookPhase {
	for _, h := range rel.Hooks {
		if h.Name == "post" {
			return h.LastRun.Phase
		}
	}
	return ""
}

// helmFailedOf tells whether Helm itself recorded h's target as failed;
// the wrapper passed that through and holds nothing.
func helmFailedOf(h *Held) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.helmFailed
}

// supersededOf returns the revisions whose superseding h defers until
// Commit, in ascending order.
func supersededOf(h *Held) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	vs := make([]int, 0, len(h.deferred))
	for _, r := range h.deferred {
		vs = append(vs, r.Version)
	}
	sort.Ints(vs)
	return vs
}

// withClientSet sets the clientset used to tell which resources are not
// ready after a failed legacy wait (Helm's ReadyChecker). By default it is
// taken from a *kube.Client; without one, kstatus alone decides.
func withClientSet(cs kubernetes.Interface) WaitOption {
	return func(o *waitOptions) { o.clientSet = cs }
}
