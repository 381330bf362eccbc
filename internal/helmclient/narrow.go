package helmclient

import (
	"context"
	"slices"
	"sync"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/afterhooks/helm-controller/internal/jobttl"
)

// resourceNamespace is what one informer of a status wait lists and
// watches: a resource in a namespace ("" for cluster-scoped resources).
type resourceNamespace struct {
	resource  schema.GroupResource
	namespace string
}

// namedObjects is what one wait waits for, by resource, namespace and
// name, and how far each object's own list or watch has read.
type namedObjects struct {
	names map[resourceNamespace][]string
	// jobs are the Jobs that delete themselves once finished, which the
	// wait sees in a stand-in when they are gone; nil for a wait that
	// must see them gone (a wait for deletion).
	jobs *selfDeletingJobs

	mu sync.Mutex
	// reached is the resourceVersion up to which the list or watch of one
	// object has delivered its changes.
	reached map[resourceNamespace]map[string]string
}

// objectsOf returns the objects of resources; standIns says whether the
// wait sees its self-deleting Jobs, once gone, in stand-ins (see jobs.go).
func objectsOf(resources helmkube.ResourceList, standIns bool, tracked *jobttl.Tracker) *namedObjects {
	o := &namedObjects{
		names:   map[resourceNamespace][]string{},
		reached: map[resourceNamespace]map[string]string{},
	}
	if standIns {
		o.jobs = newSelfDeletingJobs(tracked)
	}
	for _, info := range resources {
		if info == nil || info.Mapping == nil || info.Object == nil {
			continue
		}
		// Helm's waiter takes namespace and name from the object; so does
		// this, so that both mean the same informer.
		m, err := meta.Accessor(info.Object)
		if err != nil || m.GetName() == "" {
			continue
		}
		key := resourceNamespace{resource: info.Mapping.Resource.GroupResource(), namespace: m.GetNamespace()}
		if !slices.Contains(o.names[key], m.GetName()) {
			o.names[key] = append(o.names[key], m.GetName())
		}
		if o.jobs != nil {
			o.jobs.add(key, info)
		}
	}
	return o
}

func (o *namedObjects) progress(key resourceNamespace, name string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reached[key][name]
}

func (o *namedObjects) reach(key resourceNamespace, name, resourceVersion string) {
	if resourceVersion == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reached[key] == nil {
		o.reached[key] = map[string]string{}
	}
	o.reached[key][name] = resourceVersion
}

// narrowDynamic is a dynamic client whose unfiltered lists and watches of
// the resources and namespaces in objects see only the named objects.
// Everything else (a status reader's label-selected list of a Deployment's
// ReplicaSets, a Get) goes to the cluster unchanged.
type narrowDynamic struct {
	dynamic.Interface
	objects *namedObjects
}

func (d *narrowDynamic) Resource(r schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &narrowResource{NamespaceableResourceInterface: d.Interface.Resource(r), resource: r.GroupResource(), objects: d.objects}
}

// IsWatchListSemanticsUnSupported makes client-go's reflectors list, then
// watch, instead of streaming the initial list through a watch: a narrowed
// watch is one stream per object, and the end-of-initial-events bookmark
// of one stream would not speak for the others.
func (d *narrowDynamic) IsWatchListSemanticsUnSupported() bool { return true }

type narrowResource struct {
	dynamic.NamespaceableResourceInterface
	resource schema.GroupResource
	objects  *namedObjects
}

func (r *narrowResource) Namespace(namespace string) dynamic.ResourceInterface {
	inner := r.NamespaceableResourceInterface.Namespace(namespace)
	key := resourceNamespace{resource: r.resource, namespace: namespace}
	names := r.objects.names[key]
	if len(names) == 0 {
		return inner
	}
	return &byName{ResourceInterface: inner, key: key, names: names, objects: r.objects}
}

// byName lists and watches each named object on its own, with a
// metadata.name field selector, and merges the results.
type byName struct {
	dynamic.ResourceInterface
	key     resourceNamespace
	names   []string
	objects *namedObjects
}

// narrowable is true for the list or watch of a whole resource, the way an
// informer asks; selected or streamed requests are left alone.
func narrowable(opts metav1.ListOptions) bool {
	return opts.LabelSelector == "" && opts.FieldSelector == "" && opts.SendInitialEvents == nil
}

func nameSelector(name string) string {
	return fields.OneTermEqualSelector("metadata.name", name).String()
}

// List lists every named object. The merged list carries the first list's
// resourceVersion; each object's own is remembered for its watch.
func (b *byName) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if !narrowable(opts) {
		return b.ResourceInterface.List(ctx, opts)
	}
	var merged *unstructured.UnstructuredList
	for _, name := range b.names {
		one := opts
		one.FieldSelector = nameSelector(name)
		list, err := b.ResourceInterface.List(ctx, one)
		if err != nil {
			return nil, err
		}
		b.objects.reach(b.key, name, list.GetResourceVersion())
		b.standInWhenGone(ctx, name, list)
		if merged == nil {
			merged = list
			continue
		}
		merged.Items = append(merged.Items, list.Items...)
	}
	return merged, nil
}

// standInWhenGone records the state list holds of the self-deleting Job
// name, or adds its stand-in when list holds none (see jobs.go).
func (b *byName) standInWhenGone(ctx context.Context, name string, list *unstructured.UnstructuredList) {
	jobs := b.objects.jobs
	if !jobs.covers(b.key, name) {
		return
	}
	if len(list.Items) == 0 {
		list.Items = append(list.Items, *jobs.standIn(ctx, b.key, name, list.GetResourceVersion()))
		return
	}
	for i := range list.Items {
		jobs.saw(b.key, &list.Items[i])
	}
}

// standInForDeletion turns the deletion of the self-deleting Job name into
// a change to its stand-in, and records every other state it delivers.
func (b *byName) standInForDeletion(ctx context.Context, name string, ev watch.Event) watch.Event {
	jobs := b.objects.jobs
	if !jobs.covers(b.key, name) {
		return ev
	}
	switch ev.Type {
	case watch.Added, watch.Modified:
		jobs.saw(b.key, ev.Object)
	case watch.Deleted:
		jobs.saw(b.key, ev.Object)
		rv := ""
		if m, err := meta.Accessor(ev.Object); err == nil {
			rv = m.GetResourceVersion()
		}
		return watch.Event{Type: watch.Modified, Object: jobs.standIn(ctx, b.key, name, rv)}
	}
	return ev
}

// Watch watches every named object from where its own list or watch left
// off, not from the resourceVersion asked for: that version comes from one
// object's stream, and resuming another object's stream from it could skip
// that object's changes or replay older ones.
func (b *byName) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if !narrowable(opts) {
		return b.ResourceInterface.Watch(ctx, opts)
	}
	merged := newMergedWatch()
	for _, name := range b.names {
		one := opts
		one.FieldSelector = nameSelector(name)
		if rv := b.objects.progress(b.key, name); rv != "" {
			one.ResourceVersion = rv
		}
		w, err := b.ResourceInterface.Watch(ctx, one)
		if err != nil {
			merged.Stop()
			return nil, err
		}
		merged.add(w, func(ev watch.Event) watch.Event { return b.standInForDeletion(ctx, name, ev) }, func(obj runtime.Object) {
			if m, err := meta.Accessor(obj); err == nil {
				b.objects.reach(b.key, name, m.GetResourceVersion())
			}
		})
	}
	merged.closeWhenDone()
	return merged, nil
}

// mergedWatch is one watch over several. It ends when any of them ends, so
// that the informer watches all of them again.
type mergedWatch struct {
	result  chan watch.Event
	stopped chan struct{}
	once    sync.Once
	wg      sync.WaitGroup

	mu      sync.Mutex
	watches []watch.Interface
}

func newMergedWatch() *mergedWatch {
	return &mergedWatch{result: make(chan watch.Event), stopped: make(chan struct{})}
}

func (m *mergedWatch) ResultChan() <-chan watch.Event { return m.result }

func (m *mergedWatch) Stop() {
	m.once.Do(func() {
		close(m.stopped)
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, w := range m.watches {
			w.Stop()
		}
	})
}

// add forwards w's events as translate turns them; seen is told the
// object of every event that advances w, bookmarks included (those are
// not forwarded: the informer does not need them, and their version is
// w's alone).
func (m *mergedWatch) add(w watch.Interface, translate func(watch.Event) watch.Event, seen func(runtime.Object)) {
	m.mu.Lock()
	m.watches = append(m.watches, w)
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.Stop()
		for {
			select {
			case <-m.stopped:
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Bookmark {
					seen(ev.Object)
					continue
				}
				if ev.Type != watch.Error {
					ev = translate(ev)
				}
				select {
				case m.result <- ev:
				case <-m.stopped:
					return
				}
				// Only a delivered change counts as read: one dropped at
				// Stop is read again by the next watch.
				if ev.Type != watch.Error {
					seen(ev.Object)
				}
			}
		}
	}()
}

func (m *mergedWatch) closeWhenDone() {
	go func() {
		m.wg.Wait()
		close(m.result)
	}()
}
