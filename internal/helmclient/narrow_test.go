package helmclient

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// collection is a fake resource collection: each object lists at its own
// resourceVersion, and every watch is recorded with the version it starts
// from.
type collection struct {
	dynamic.ResourceInterface
	listVersions map[string]string

	mu      sync.Mutex
	watches map[string]*watch.FakeWatcher
	from    map[string]string
}

func newCollection(versions map[string]string) *collection {
	return &collection{listVersions: versions, watches: map[string]*watch.FakeWatcher{}, from: map[string]string{}}
}

func selectedName(opts metav1.ListOptions) string {
	return strings.TrimPrefix(opts.FieldSelector, "metadata.name=")
}

func (c *collection) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	name := selectedName(opts)
	list := &unstructured.UnstructuredList{}
	list.SetResourceVersion(c.listVersions[name])
	list.Items = []unstructured.Unstructured{object(name, c.listVersions[name])}
	return list, nil
}

func (c *collection) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := selectedName(opts)
	if opts.LabelSelector != "" {
		name = "selector " + opts.LabelSelector
	}
	w := watch.NewFakeWithChanSize(4, false)
	c.watches[name] = w
	c.from[name] = opts.ResourceVersion
	return w, nil
}

func (c *collection) watchOf(name string) *watch.FakeWatcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watches[name]
}

func (c *collection) startedFrom() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.from {
		out[k] = v
	}
	return out
}

func object(name, resourceVersion string) unstructured.Unstructured {
	u := unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName(name)
	u.SetResourceVersion(resourceVersion)
	return u
}

func receive(t *testing.T, w watch.Interface) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no event from the merged watch")
		return watch.Event{}, false
	}
}

// TestByNameResumesEachObjectWhereItLeftOff follows an informer's calls:
// list, watch from the list's version, the watch ends, watch again from
// the last version it saw. Every object's watch must start where that
// object's own list or watch left off.
func TestByNameResumesEachObjectWhereItLeftOff(t *testing.T) {
	coll := newCollection(map[string]string{"a": "10", "b": "20"})
	key := resourceNamespace{resource: schema.GroupResource{Resource: "configmaps"}, namespace: "apps"}
	objects := &namedObjects{names: map[resourceNamespace][]string{key: {"a", "b"}}, reached: map[resourceNamespace]map[string]string{}}
	b := &byName{ResourceInterface: coll, key: key, names: objects.names[key], objects: objects}
	ctx := context.Background()

	list, err := b.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("listed %d objects, want a and b", len(list.Items))
	}

	w, err := b.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	if got := coll.startedFrom(); got["a"] != "10" || got["b"] != "20" {
		t.Fatalf("first watches started from %v, want a from 10 and b from 20 (their lists)", got)
	}

	changed := object("b", "25")
	coll.watchOf("b").Modify(&changed)
	if ev, _ := receive(t, w); ev.Type != watch.Modified || ev.Object.(*unstructured.Unstructured).GetResourceVersion() != "25" {
		t.Fatalf("got %v, want b's change at 25", ev)
	}
	// A bookmark moves a's stream on without reaching the informer.
	mark := object("a", "30")
	coll.watchOf("a").Action(watch.Bookmark, &mark)
	time.Sleep(100 * time.Millisecond)
	coll.watchOf("a").Stop()
	if ev, ok := receive(t, w); ok {
		t.Fatalf("got %v after a's stream ended, want the merged watch to end", ev)
	}

	// The informer resumes from the last version it saw (b's 25).
	if _, err := b.Watch(ctx, metav1.ListOptions{ResourceVersion: "25"}); err != nil {
		t.Fatal(err)
	}
	if got := coll.startedFrom(); got["a"] != "30" || got["b"] != "25" {
		t.Errorf("resumed watches started from %v, want a from 30 and b from 25", got)
	}
}

// TestByNameLeavesSelectedRequestsAlone: a status reader's label-selected
// list or watch (a Deployment's ReplicaSets) is not narrowed to names.
func TestByNameLeavesSelectedRequestsAlone(t *testing.T) {
	coll := newCollection(map[string]string{"a": "10"})
	key := resourceNamespace{resource: schema.GroupResource{Resource: "configmaps"}, namespace: "apps"}
	objects := &namedObjects{names: map[resourceNamespace][]string{key: {"a"}}, reached: map[resourceNamespace]map[string]string{}}
	b := &byName{ResourceInterface: coll, key: key, names: objects.names[key], objects: objects}

	if _, err := b.Watch(context.Background(), metav1.ListOptions{LabelSelector: "app=web", ResourceVersion: "7"}); err != nil {
		t.Fatal(err)
	}
	got := coll.startedFrom()
	if len(got) != 1 || got["selector app=web"] != "7" {
		t.Errorf("watches %v, want only the selected one, from 7", got)
	}
}
