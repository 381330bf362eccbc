package preview_test

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/preview"
)

// The plan is taken, then the state machine acts over the same cluster,
// and what happened is compared with what the plan said: the action, the
// objects created, updated (their resourceVersion moved), left alone,
// deleted and kept, and the hooks run, in the order they ran.
func TestPlanMatchesWhatHappens(t *testing.T) {
	for _, order := range []v2.HookWaitStrategy{v2.BeforeHooks, v2.AfterHooks} {
		t.Run(string(order), func(t *testing.T) {
			e := newEnv(t, nil)
			obj := e.hr(func(o *v2.HelmRelease) { o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: order} })
			e.reconcile(obj, chartV1, values("a", "1"))
			before := e.configMaps()

			pv := e.preview(obj, chartV2(), values("a", "2"))
			if len(pv.Actions) != 1 {
				t.Fatalf("actions %+v, want one", pv.Actions)
			}
			planned := pv.Actions[0]

			e.reconcile(obj, chartV2, values("a", "2"))
			after := e.configMaps()

			if got := obj.Status.History.Latest().Action; string(got) != string(planned.Verb) {
				t.Errorf("the reconcile ran %s, the plan said %s", got, planned.Verb)
			}
			e.compareObjects(planned.Objects, before, after)
			e.compareHooks(planned.Hooks)
		})
	}
}

// configMaps are the resourceVersions of the env's ConfigMaps that are
// not hooks, by name.
func (e *env) configMaps() map[string]string { return e.listConfigMaps(false) }

// hookConfigMaps are the resourceVersions of the env's hook ConfigMaps,
// by name.
func (e *env) hookConfigMaps() map[string]string { return e.listConfigMaps(true) }

func (e *env) listConfigMaps(hooks bool) map[string]string {
	e.t.Helper()
	list, err := e.cs.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, cm := range list.Items {
		if _, hook := cm.Annotations["helm.sh/hook"]; hook == hooks && cm.Name != "kube-root-ca.crt" {
			out[cm.Name] = cm.ResourceVersion
		}
	}
	return out
}

func (e *env) compareObjects(planned preview.Objects, before, after map[string]string) {
	e.t.Helper()
	var created, updated, unchanged, deleted []string
	for name, rv := range after {
		switch old, ok := before[name]; {
		case !ok:
			created = append(created, "ConfigMap/"+name)
		case old != rv:
			updated = append(updated, "ConfigMap/"+name)
		default:
			unchanged = append(unchanged, "ConfigMap/"+name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			deleted = append(deleted, "ConfigMap/"+name)
		}
	}
	for _, l := range [][]string{created, updated, unchanged, deleted} {
		sort.Strings(l)
	}
	eq(e.t, "created (plan vs cluster)", names(planned.Create), created)
	eq(e.t, "updated (plan vs cluster)", names(planned.Update), updated)
	// Kept objects stay as they were: unchanged in the cluster.
	eq(e.t, "unchanged and kept (plan vs cluster)", sortedNames(planned.Unchanged, planned.Keep), unchanged)
	eq(e.t, "deleted (plan vs cluster)", names(planned.Delete), deleted)
}

func sortedNames(lists ...[]preview.Object) []string {
	var out []string
	for _, l := range lists {
		out = append(out, names(l)...)
	}
	sort.Strings(out)
	return out
}

// compareHooks compares the planned hooks with those the stored release
// says ran, in the order they started.
func (e *env) compareHooks(planned []preview.Hook) {
	e.t.Helper()
	_, last := e.lastRelease()
	type run struct {
		name  string
		start int64
	}
	var ran []run
	for _, h := range last.Hooks {
		if !h.LastRun.StartedAt.IsZero() {
			ran = append(ran, run{h.Name, h.LastRun.StartedAt.UnixNano()})
		}
	}
	sort.SliceStable(ran, func(i, j int) bool { return ran[i].start < ran[j].start })
	var got, want []string
	for _, r := range ran {
		got = append(got, r.name)
	}
	for _, h := range planned {
		want = append(want, h.Name)
	}
	eq(e.t, "hooks run in order (cluster vs plan)", got, want)
}

// A preview sends only reads and dry runs: every request it makes is
// recorded, and any other method without dryRun fails the test.
func TestPreviewOnlyReads(t *testing.T) {
	e, rec := newRecordedEnv(t)
	obj := e.hr(func(o *v2.HelmRelease) {
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true, DeleteHookResourceKinds: []string{"ConfigMap"}}
	})
	// The recorder sees writes: the install that the previews follow.
	rec.start()
	e.reconcile(obj, chartV1, values("a", "1"))
	if writes := slices.IndexFunc(rec.stop(), func(r string) bool { return !strings.HasPrefix(r, "GET ") }); writes < 0 {
		t.Fatal("the recorder saw no write of the install")
	}
	for _, tc := range []struct {
		name string
		mut  func(*v2.HelmRelease)
	}{{"upgrade", func(*v2.HelmRelease) {}}, {"uninstall", func(o *v2.HelmRelease) { o.DeletionTimestamp = &metav1.Time{Time: time.Now()} }}} {
		rec.start()
		o := obj.DeepCopy()
		tc.mut(o)
		pv := e.preview(o, chartV2(), values("a", "2"))
		reqs := rec.stop()
		if !pv.Changes() {
			t.Fatalf("%s: a preview without changes (%s)", tc.name, pv.Step)
		}
		wantOnlyReads(t, tc.name, reqs)
		t.Logf("%s: %d requests, all reads or dry runs", tc.name, len(reqs))
	}
}

// newRecordedEnv is an env whose requests rec records once started.
func newRecordedEnv(t *testing.T) (*env, *recorder) {
	rec := &recorder{}
	e := newEnv(t, func(c rest.Config) *rest.Config {
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
		return &c
	})
	return e, rec
}

// wantOnlyReads fails the test for a request that is neither a read nor
// a dry run, and when there was none at all.
func wantOnlyReads(t *testing.T, what string, reqs []string) {
	t.Helper()
	if len(reqs) == 0 {
		t.Fatalf("%s: the recorder saw no request", what)
	}
	for _, r := range reqs {
		if !strings.HasPrefix(r, "GET ") && !strings.Contains(r, "dryRun=All") {
			t.Errorf("%s: the preview sent %s", what, r)
		}
	}
}

type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	on   bool
	reqs []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	if r.on {
		r.reqs = append(r.reqs, req.Method+" "+req.URL.String())
	}
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *recorder) start() { r.mu.Lock(); r.on, r.reqs = true, nil; r.mu.Unlock() }

func (r *recorder) stop() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return slices.Clone(r.reqs)
}

// lastRelease is the newest stored revision of the release web, and the
// Helm configuration it was read with.
func (e *env) lastRelease() (*helmaction.Configuration, *releasev1.Release) {
	e.t.Helper()
	cfg, err := e.factory.Build(e.ns, e.ns)
	if err != nil {
		e.t.Fatal(err)
	}
	last, err := action.LastRelease(cfg, "web")
	if err != nil {
		e.t.Fatal(err)
	}
	return cfg, last
}
