package jobttl

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Outcome is how a self-deleting Job ended, as far as a Tracker saw.
type Outcome int

const (
	// Unknown: the Job was not applied through this tracker, or it was
	// gone before the tracker saw it finish.
	Unknown Outcome = iota
	// Running: the tracker watches it and has not seen it finish yet.
	Running
	// Complete: the tracker saw its Complete condition.
	Complete
	// Failed: the tracker saw its Failed condition.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Running:
		return "running"
	case Complete:
		return "complete"
	case Failed:
		return "failed"
	default:
		return "unknown"
	}
}

// Default limits of a Tracker.
const (
	// DefaultWatchLimit bounds how long one Job is watched: no release's
	// action runs that long.
	DefaultWatchLimit = 24 * time.Hour
	// DefaultKeep is how long what was seen of a finished Job is kept, so
	// that a readiness wait resumed later in the same process (afterHooks
	// after a cancelled reconcile) still knows it.
	DefaultKeep = 24 * time.Hour
)

// Tracker watches every self-deleting Job applied through it from the
// moment of its apply, and keeps the last state it saw of each. A wait
// that starts late (afterHooks' readiness wait starts after the post
// hooks) or that polls (ordered readiness expressions) then still knows
// how a Job ended that Kubernetes deleted before the wait looked.
//
// One Tracker serves a whole cluster: a Job is named by namespace and
// name, and the latest apply of a name replaces what was tracked of it.
// Safe for concurrent use.
type Tracker struct {
	watchLimit time.Duration
	keep       time.Duration
	now        func() time.Time

	mu      sync.Mutex
	records map[jobKey]*record
}

type jobKey struct{ namespace, name string }

// record is what a Tracker knows of one apply of a Job.
type record struct {
	cancel context.CancelFunc
	// ended is closed once the outcome is final: the Job finished, was
	// deleted, or the watch ended.
	ended chan struct{}

	mu       sync.Mutex
	last     *unstructured.Unstructured
	outcome  Outcome
	finished time.Time
}

// NewTracker returns a Tracker with the default limits.
func NewTracker() *Tracker {
	return &Tracker{watchLimit: DefaultWatchLimit, keep: DefaultKeep, now: time.Now, records: map[jobKey]*record{}}
}

// Track starts watching info's Job, when it is one that deletes itself,
// from the resourceVersion its apply returned (info.Object as Helm
// refreshes it after an apply), so that no change after the apply is
// missed. Anything else, and an object without a resourceVersion (a dry
// run), is ignored.
func (t *Tracker) Track(info *resource.Info) {
	if t == nil || !DeletesItself(info) || info.Client == nil || info.Mapping == nil {
		return
	}
	m, err := meta.Accessor(info.Object)
	if err != nil || m.GetResourceVersion() == "" || m.GetName() == "" {
		return
	}
	key := jobKey{namespace: m.GetNamespace(), name: m.GetName()}
	t.follow(key, info.Object, &jobWatcher{info: info, namespace: key.namespace, name: key.name})
}

// follow records applied as the state of the Job key and, unless it has
// finished already, watches it with w from applied's resourceVersion.
func (t *Tracker) follow(key jobKey, applied runtime.Object, w cache.WatcherWithContext) {
	ctx, cancel := context.WithTimeout(context.Background(), t.watchLimit)
	r := &record{cancel: cancel, ended: make(chan struct{}), outcome: Running}
	outcome := r.see(applied)

	t.mu.Lock()
	t.forgetOld()
	if old := t.records[key]; old != nil {
		old.cancel()
	}
	t.records[key] = r
	t.mu.Unlock()

	if outcome != Running {
		cancel()
		r.end()
		return
	}
	m, _ := meta.Accessor(applied)
	go r.follow(ctx, w, m.GetResourceVersion())
}

// Saw records obj, a state of a Job that a caller read itself (a poll of
// ordered's readiness expressions), when it shows the Job finished; a
// Job still running is left to its watch.
func (t *Tracker) Saw(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if t == nil || err != nil {
		return
	}
	u, outcome, ok := jobState(obj)
	if !ok || outcome == Running {
		return
	}
	key := jobKey{namespace: m.GetNamespace(), name: m.GetName()}
	t.mu.Lock()
	r := t.records[key]
	t.mu.Unlock()
	if r == nil {
		t.follow(key, u, nil)
		return
	}
	r.see(u)
	r.cancel() // the watch ends and closes ended
}

// Last returns the last state seen of the Job namespace/name and how it
// ended. A Job still watched is waited for until its outcome is final or
// ctx ends: a caller asks once it found the Job gone, and the watch
// delivers the Job's last changes and its deletion moments later.
func (t *Tracker) Last(ctx context.Context, namespace, name string) (*unstructured.Unstructured, Outcome) {
	if t == nil {
		return nil, Unknown
	}
	t.mu.Lock()
	r := t.records[jobKey{namespace: namespace, name: name}]
	t.mu.Unlock()
	if r == nil {
		return nil, Unknown
	}
	select {
	case <-r.ended:
	case <-ctx.Done():
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	outcome := r.outcome
	if outcome == Running {
		// Gone, by the caller's word, without a finish the tracker saw.
		outcome = Unknown
	}
	return r.last.DeepCopy(), outcome
}

// forgetOld drops records of Jobs that finished longer ago than keep.
// t.mu is held.
func (t *Tracker) forgetOld() {
	cutoff := t.now().Add(-t.keep)
	for k, r := range t.records {
		r.mu.Lock()
		old := !r.finished.IsZero() && r.finished.Before(cutoff)
		r.mu.Unlock()
		if old {
			delete(t.records, k)
		}
	}
}

// follow watches the Job from resourceVersion until it finishes, is
// deleted, or ctx ends, recording each state it sees.
func (r *record) follow(ctx context.Context, w cache.WatcherWithContext, resourceVersion string) {
	defer r.end()
	defer r.cancel()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, w)
	if err != nil {
		return
	}
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rw.Done():
			return
		case ev, ok := <-rw.ResultChan():
			if !ok {
				return
			}
			if r.handle(ev) {
				return
			}
		}
	}
}

// handle records what ev says of the Job and reports whether the outcome
// is final.
func (r *record) handle(ev watch.Event) bool {
	switch ev.Type {
	case watch.Added, watch.Modified:
		return r.see(ev.Object) != Running
	case watch.Deleted:
		r.see(ev.Object)
		return true
	case watch.Error:
		// The retry watcher ends with an error it cannot resume from
		// (the resourceVersion is too old): what follows is not known.
		return true
	}
	return false
}

// see records obj as the Job's latest state and returns its outcome.
func (r *record) see(obj runtime.Object) Outcome {
	u, outcome, ok := jobState(obj)
	if !ok {
		return Running
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = u
	if r.outcome == Running {
		r.outcome = outcome
	}
	return outcome
}

// jobState returns obj as the unstructured Job a record keeps, with its
// outcome; false when obj cannot be read as one.
func jobState(obj runtime.Object) (*unstructured.Unstructured, Outcome, bool) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, Running, false
	}
	u := &unstructured.Unstructured{Object: content}
	if u.GetKind() == "" {
		u.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	}
	u.SetManagedFields(nil)
	return u, outcomeOf(u), true
}

func (r *record) end() {
	r.mu.Lock()
	if r.finished.IsZero() {
		r.finished = time.Now()
	}
	r.mu.Unlock()
	close(r.ended)
}

// outcomeOf tells from a Job's conditions whether it finished.
func outcomeOf(u *unstructured.Unstructured) Outcome {
	switch {
	case HasCondition(u, batchv1.JobFailed):
		return Failed
	case HasCondition(u, batchv1.JobComplete):
		return Complete
	default:
		return Running
	}
}

// HasCondition reports whether the Job u has condition t with status True.
func HasCondition(u *unstructured.Unstructured, t batchv1.JobConditionType) bool {
	if u == nil {
		return false
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == string(t) && m["status"] == string(corev1.ConditionTrue) {
			return true
		}
	}
	return false
}

// jobWatcher watches one Job by name with the REST client of the apply
// that created it, so the watch runs as the identity that applied it.
type jobWatcher struct {
	info            *resource.Info
	namespace, name string
}

func (w *jobWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.name).String()
	return w.info.Client.Get().
		NamespaceIfScoped(w.namespace, w.info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace).
		Resource(w.info.Mapping.Resource.Resource).
		VersionedParams(&opts, metav1.ParameterCodec).
		Watch(ctx)
}

// Tracking is a kube client that tracks the self-deleting Jobs it applies:
// internal/helmclient's, and every wrapper of it, which hands on the one it
// wraps.
type Tracking interface {
	JobTracker() *Tracker
}

// TrackerOf returns the tracker of the kube client kc, or nil when kc
// tracks nothing (a Tracker's methods take a nil one as knowing nothing).
func TrackerOf(kc any) *Tracker {
	if t, ok := kc.(Tracking); ok {
		return t.JobTracker()
	}
	return nil
}
