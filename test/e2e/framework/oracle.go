package framework

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// OracleEnv turns the oracle on for every namespace that Namespace makes
// when set to "all".
const OracleEnv = "HELM_CONTROLLER_E2E_ORACLE"

// oracleSettle is how long the oracle waits after a Ready=True before it
// judges it: the controller writes the rest of the status in a second
// request, and the watches of other kinds deliver what happened before
// the transition a moment later than the HelmRelease's own.
const oracleSettle = 3 * time.Second

// oracleKind is a kind the oracle records, with the label selector that
// narrows it (empty: every object).
type oracleKind struct {
	kind     string
	gvr      schema.GroupVersionResource
	selector string
}

// oracleKinds are what the oracle records in a namespace: the Helm
// storage Secrets tell Helm's actions apart, the controller's and those
// run by hand alike (Recording.Storage).
var oracleKinds = []oracleKind{
	{"HelmRelease", schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}, ""},
	{"Job", schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, ""},
	{"Pod", schema.GroupVersionResource{Version: "v1", Resource: "pods"}, ""},
	{"Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, ""},
	{"StatefulSet", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, ""},
	{"DaemonSet", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, ""},
	{"Secret", schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, "owner=helm"},
}

// Oracle is the ground truth a test checks the controller's Ready against.
// It watches a namespace independently of the controller, keeps every
// state of every HelmRelease, Job, Pod, Deployment, StatefulSet, DaemonSet
// and Helm storage Secret there, objects that deleted themselves included,
// and judges every Ready=True a HelmRelease turns to (CheckTransition): a
// lie fails the test.
type Oracle struct {
	t     testing.TB
	hooks HookSource

	mu        sync.Mutex
	rec       Recording
	byUID     map[types.UID]*ObjectHistory
	judged    map[Transition]bool
	lastTx    time.Time
	checks    int
	watchErrs []error
	// mayKill are Kind/name of runs the test deletes while they run.
	mayKill []string
}

// oracles are the running oracles, by API server and namespace: Env is
// copied by tests that point it at a cluster of their own.
var oracles = struct {
	sync.Mutex
	byNamespace map[string]*Oracle
}{byNamespace: map[string]*Oracle{}}

// Oracle starts the oracle on ns for the rest of the test; a second call
// for the same namespace returns the first oracle. Start it before the
// test creates its HelmReleases.
func (e *Env) Oracle(t testing.TB, ns string) *Oracle {
	t.Helper()
	key := e.Cluster.APIServerURL() + "/" + ns
	oracles.Lock()
	defer oracles.Unlock()
	if o, ok := oracles.byNamespace[key]; ok {
		return o
	}
	o, err := startOracle(t, e.Cluster.RESTConfig(), ns, e.storedHooks)
	if err != nil {
		t.Fatalf("starting the oracle on %s: %v", ns, err)
	}
	oracles.byNamespace[key] = o
	t.Cleanup(func() {
		oracles.Lock()
		delete(oracles.byNamespace, key)
		oracles.Unlock()
	})
	return o
}

// oracleForEveryNamespace says whether OracleEnv asks for the oracle in
// every test namespace.
func oracleForEveryNamespace() bool { return os.Getenv(OracleEnv) == "all" }

func startOracle(t testing.TB, cfg *rest.Config, ns string, hooks HookSource) (*Oracle, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the dynamic client: %w", err)
	}
	o := &Oracle{t: t, hooks: hooks, byUID: map[types.UID]*ObjectHistory{}, judged: map[Transition]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	var followers sync.WaitGroup
	for _, k := range oracleKinds {
		client := dyn.Resource(k.gvr).Namespace(ns)
		from, err := o.list(ctx, client, k, true)
		if err != nil {
			cancel()
			followers.Wait()
			return nil, err
		}
		followers.Add(1)
		go func() {
			defer followers.Done()
			o.follow(ctx, client, k, from)
		}()
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go o.judgeEvery(time.Second, stop, stopped)
	t.Cleanup(func() {
		close(stop)
		<-stopped
		o.waitSettled()
		cancel()
		followers.Wait()
		o.judge(true)
		o.reportKills()
		o.report()
	})
	return o, nil
}

// list records every object of the kind in the namespace and returns the
// resourceVersion to watch from. The first list records what existed
// before the oracle started; a list again after the watch fell too far
// behind (410 Gone, after an API server outage) records objects it never
// saw as existing before, since when they were created is not known.
func (o *Oracle) list(ctx context.Context, client dynamic.ResourceInterface, k oracleKind, first bool) (string, error) {
	list, err := client.List(ctx, metav1.ListOptions{LabelSelector: k.selector})
	if err != nil {
		return "", fmt.Errorf("listing %ss: %w", k.kind, err)
	}
	for i := range list.Items {
		o.observe(k.kind, &list.Items[i], watch.Modified, true)
	}
	if !first {
		o.t.Logf("oracle: the watch of %ss fell behind and was listed again at resourceVersion %s; "+
			"changes in between are known only by their result", k.kind, list.GetResourceVersion())
	}
	return list.GetResourceVersion(), nil
}

// follow watches the kind from resourceVersion from until ctx ends,
// listing again whenever the watch expired.
func (o *Oracle) follow(ctx context.Context, client dynamic.ResourceInterface, k oracleKind, from string) {
	for ctx.Err() == nil {
		w, err := watchtools.NewRetryWatcherWithContext(ctx, from, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				opts.AllowWatchBookmarks = true
				opts.LabelSelector = k.selector
				return client.Watch(ctx, opts)
			},
		})
		if err != nil {
			o.fail(fmt.Errorf("watching %ss: %w", k.kind, err))
			return
		}
		expired := o.consume(k.kind, w)
		w.Stop()
		<-w.Done()
		if !expired || ctx.Err() != nil {
			return
		}
		for ctx.Err() == nil {
			if from, err = o.list(ctx, client, k, false); err == nil {
				break
			}
			time.Sleep(time.Second) // the API server may still be down
		}
	}
}

// consume records the watch's events until it ends; it returns true when
// it ended because the resourceVersion expired.
func (o *Oracle) consume(kind string, w *watchtools.RetryWatcher) bool {
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if obj, ok := ev.Object.(*unstructured.Unstructured); ok {
				o.observe(kind, obj, ev.Type, false)
			}
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return true
			}
			o.fail(fmt.Errorf("watching %ss: %v", kind, err))
		}
	}
	return false
}

func (o *Oracle) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.watchErrs = append(o.watchErrs, err)
}

// observe keeps one state of obj.
func (o *Oracle) observe(kind string, obj *unstructured.Unstructured, event watch.EventType, listed bool) {
	order, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		o.fail(fmt.Errorf("%s %s: resourceVersion %q is not an etcd revision; the oracle cannot order it", kind, obj.GetName(), obj.GetResourceVersion()))
		return
	}
	if obj.GetKind() == "" {
		obj.SetKind(kind)
	}
	if kind == "Secret" {
		// A release record's labels name its release and revision; its
		// data, the whole release, is of no use to the oracle.
		unstructured.RemoveNestedField(obj.Object, "data")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.byUID[obj.GetUID()]
	if !ok {
		h = &ObjectHistory{Kind: kind, Listed: listed}
		o.byUID[obj.GetUID()] = h
		switch kind {
		case "HelmRelease":
			o.rec.Releases = append(o.rec.Releases, h)
		case "Secret":
			o.rec.Storage = append(o.rec.Storage, h)
		default:
			o.rec.Objects = append(o.rec.Objects, h)
		}
	}
	if n := len(h.States); n > 0 && h.States[n-1].Order == order && event != watch.Deleted {
		return // listed again, unchanged
	}
	h.States = append(h.States, Observation{Order: order, Seen: time.Now(), Object: obj, Deleted: event == watch.Deleted})
}

func (o *Oracle) judgeEvery(interval time.Duration, stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			o.judge(false)
		}
	}
}

// waitSettled waits until the last Ready=True seen has had its settling
// time, so that the judgement at the end of a test sees what followed it.
func (o *Oracle) waitSettled() {
	o.mu.Lock()
	var last time.Time
	for _, hr := range o.rec.Releases {
		for _, s := range hr.States {
			if s.Seen.After(last) {
				last = s.Seen
			}
		}
	}
	o.mu.Unlock()
	if wait := time.Until(last.Add(oracleSettle)); wait > 0 {
		time.Sleep(wait)
	}
}

// judge checks every Ready=True transition not judged yet that has
// settled, or every one when final.
func (o *Oracle) judge(final bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, hr := range o.rec.Releases {
		transitions, err := ReadyTransitions(hr)
		if err != nil {
			o.watchErrs = append(o.watchErrs, err)
			continue
		}
		for _, idx := range transitions {
			tx := Transition{Release: hr, Index: idx}
			if o.judged[tx] || (!final && time.Since(hr.States[idx].Seen) < oracleSettle) {
				continue
			}
			o.judged[tx] = true
			o.checks++
			v := Judge(&o.rec, hr, idx, o.hooks)
			state := hr.States[idx]
			upstream := upstreamRan(state.Object.GetLabels()[ShardLabel], state.Seen)
			for _, lie := range v.Lies {
				if upstream {
					o.t.Logf("%s (written by upstream helm-controller: logged, not failed)", lie)
					continue
				}
				o.t.Error(lie.String())
			}
			o.t.Logf("oracle: %s Ready=True at revision %d (action %q) held to %s: %d lies",
				hr.describe(), v.Revision, v.Action, strings.Join(v.Judged, ", "), len(v.Lies))
		}
	}
}

// MayKill tells the oracle that the test itself deletes the running Job or
// Pod kind/name, so that its deletion is no kill.
func (o *Oracle) MayKill(kind, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.mayKill = append(o.mayKill, kind+"/"+name)
}

// reportKills fails the test for every run deleted while it ran.
func (o *Oracle) reportKills() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, k := range KilledRuns(&o.rec, o.mayKill) {
		o.t.Error(k.String())
	}
}

func (o *Oracle) report() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, err := range o.watchErrs {
		o.t.Errorf("oracle: the recording is incomplete: %v", err)
	}
	o.t.Logf("oracle: judged %d Ready=True transitions of %d HelmReleases against %d recorded objects",
		o.checks, len(o.rec.Releases), len(o.rec.Objects))
}

// Judged returns how many Ready=True transitions the oracle judged so far.
func (o *Oracle) Judged() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.checks
}

// storedHooks reads the hooks Helm stored for a revision.
func (e *Env) storedHooks(ns, releaseName string, revision int) ([]HookRef, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stored, err := e.ReadStorage(ctx, e.Client, ns, releaseName)
	if err != nil {
		return nil, fmt.Errorf("reading Helm storage of %s/%s: %w", ns, releaseName, err)
	}
	for _, s := range stored {
		if s.Release.Version != revision {
			continue
		}
		var hooks []HookRef
		for _, h := range s.Release.Hooks {
			ref := HookRef{Kind: h.Kind, Name: h.Name}
			for _, ev := range h.Events {
				ref.Events = append(ref.Events, string(ev))
			}
			hooks = append(hooks, ref)
		}
		return hooks, nil
	}
	return nil, fmt.Errorf("no revision %d of %s/%s in Helm storage (%s)", revision, ns, releaseName, Describe(stored))
}
