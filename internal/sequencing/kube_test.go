package sequencing

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	"github.com/afterhooks/helm-controller/internal/jobttl"
)

// fakeKube is a Helm kube client that records what it is asked to do, in
// order, as "create a b", "update a b", "delete a b", "keep a", "wait a b"
// and "gone a b" (object names, sorted). It knows which objects exist, so
// that a wait for deletion waits for what is really still there.
type fakeKube struct {
	kube.Interface
	mu    sync.Mutex
	calls []string
	// notReady makes the wait of a list holding this object fail.
	notReady string
	// gates hold the wait of a list holding the object until the channel
	// is closed or the wait's timeout ends.
	gates map[string]chan struct{}
	// held objects stay after their deletion, as behind a finalizer;
	// refused ones cannot be deleted at all.
	held, refused map[string]bool
	// exists are the objects created or updated and not deleted since;
	// deleted are those whose deletion was asked for.
	exists, deleted map[string]bool
	// jobs stands for the tracker of the kube client sequencing wraps.
	jobs *jobttl.Tracker
}

func (f *fakeKube) JobTracker() *jobttl.Tracker { return f.jobs }

func (f *fakeKube) record(verb string, list kube.ResourceList) {
	names := make([]string, 0, len(list))
	for _, info := range list {
		names = append(names, info.Name)
	}
	slices.Sort(names)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.TrimSpace(verb+" "+strings.Join(names, " ")))
}

func (f *fakeKube) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// called tells whether call was recorded.
func (f *fakeKube) called(call string) bool {
	return slices.Contains(f.Calls(), call)
}

func (f *fakeKube) setExists(list kube.ResourceList) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exists == nil {
		f.exists = map[string]bool{}
	}
	for _, info := range list {
		f.exists[info.Name] = true
	}
}

// remove deletes the objects of list as the API server would: refused
// ones fail, held ones stay (marked deleted), the others go.
func (f *fakeKube) remove(list kube.ResourceList) (kube.ResourceList, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.deleted == nil {
		f.deleted = map[string]bool{}
	}
	var removed kube.ResourceList
	var errs []error
	for _, info := range list {
		if f.refused[info.Name] {
			errs = append(errs, fmt.Errorf("%s is forbidden", info.Name))
			continue
		}
		f.deleted[info.Name] = true
		if !f.held[info.Name] {
			delete(f.exists, info.Name)
		}
		removed = append(removed, info)
	}
	return removed, errs
}

func (f *fakeKube) present(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exists[name]
}

// GetObject is an Options.Get over the fake's objects: held objects carry a
// deletion timestamp and a finalizer.
func (f *fakeKube) GetObject(info *resource.Info) (runtime.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists[info.Name] {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, info.Name)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": info.Name}}}
	if f.deleted[info.Name] {
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		u.SetFinalizers([]string{"example.com/block"})
	}
	return u, nil
}

// Build turns each YAML document into an Info in namespace "ns" unless it
// names its own, as Helm's client does.
func (f *fakeKube) Build(r io.Reader, _ bool) (kube.ResourceList, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var list kube.ResourceList
	for _, doc := range strings.Split(string(data), "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, err
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		ns := u.GetNamespace()
		if ns == "" {
			ns = "ns"
		}
		list = append(list, &resource.Info{
			Name: u.GetName(), Namespace: ns, Object: u,
			Mapping: &meta.RESTMapping{GroupVersionKind: u.GroupVersionKind()},
		})
	}
	return list, nil
}

func (f *fakeKube) Create(list kube.ResourceList, _ ...kube.ClientCreateOption) (*kube.Result, error) {
	f.record("create", list)
	f.setExists(list)
	return &kube.Result{Created: list}, nil
}

// Update applies target and deletes what original has and target does
// not, skipping objects with helm.sh/resource-policy: keep as Helm does.
func (f *fakeKube) Update(original, target kube.ResourceList, _ ...kube.ClientUpdateOption) (*kube.Result, error) {
	res := &kube.Result{}
	if len(target) > 0 {
		f.record("update", target)
		f.setExists(target)
		res.Updated = target
	}
	var kept, gone kube.ResourceList
	for _, info := range original.Difference(target) {
		if m, err := meta.Accessor(info.Object); err == nil && m.GetAnnotations()[kube.ResourcePolicyAnno] == kube.KeepPolicy {
			kept = append(kept, info)
			continue
		}
		gone = append(gone, info)
	}
	if len(kept) > 0 {
		f.record("keep", kept)
	}
	if len(gone) > 0 {
		f.record("delete", gone)
		removed, errs := f.remove(gone)
		res.Deleted = removed
		if len(errs) > 0 {
			return res, errors.Join(errs...)
		}
	}
	return res, nil
}

// Delete deletes as Helm's client does: everything it can, and no result
// when anything failed.
func (f *fakeKube) Delete(list kube.ResourceList, _ metav1.DeletionPropagation) (*kube.Result, []error) {
	f.record("delete", list)
	removed, errs := f.remove(list)
	if len(errs) > 0 {
		return nil, errs
	}
	return &kube.Result{Deleted: removed}, nil
}

func (f *fakeKube) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return f.GetWaiterWithOptions(ws)
}

func (f *fakeKube) GetWaiterWithOptions(ws kube.WaitStrategy, _ ...kube.WaitOption) (kube.Waiter, error) {
	return fakeWaiter{f: f, hookOnly: ws == kube.HookOnlyStrategy}, nil
}

// fakeWaiter waits on the fake's objects; as Helm's hookOnly waiter, it
// does not wait for deletions under HookOnlyStrategy.
type fakeWaiter struct {
	f        *fakeKube
	hookOnly bool
}

func (w fakeWaiter) Wait(list kube.ResourceList, timeout time.Duration) error {
	w.f.record("wait", list)
	for _, info := range list {
		if info.Name == w.f.notReady {
			return fmt.Errorf("resource %s not ready", info.Name)
		}
		if gate, ok := w.f.gates[info.Name]; ok {
			select {
			case <-gate:
			case <-time.After(timeout):
				return fmt.Errorf("context deadline exceeded: resource %s not ready", info.Name)
			}
		}
	}
	return nil
}

func (w fakeWaiter) WaitWithJobs(list kube.ResourceList, timeout time.Duration) error {
	return w.Wait(list, timeout)
}

// WaitForDelete waits until no object of list exists, or the timeout.
func (w fakeWaiter) WaitForDelete(list kube.ResourceList, timeout time.Duration) error {
	if w.hookOnly {
		return nil
	}
	w.f.record("gone", list)
	end := time.Now().Add(timeout)
	for {
		left := slices.ContainsFunc(list, func(info *resource.Info) bool { return w.f.present(info.Name) })
		if !left {
			return nil
		}
		if time.Now().After(end) {
			return errors.New("context deadline exceeded")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w fakeWaiter) WatchUntilReady(kube.ResourceList, time.Duration) error { return nil }

// object renders a manifest document below its source comment.
func object(source, kind, name string, annotations ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\n# Source: %s\napiVersion: v1\nkind: %s\nmetadata:\n  name: %s\n", source, kind, name)
	if len(annotations) > 0 {
		b.WriteString("  annotations:\n")
		for i := 0; i+1 < len(annotations); i += 2 {
			fmt.Fprintf(&b, "    %s: '%s'\n", annotations[i], annotations[i+1])
		}
	}
	return b.String()
}

// shopManifest is the database, migration and app release.
var shopManifest = object("shop/templates/db.yaml", "ConfigMap", "db", AnnotationResourceGroup, "db") +
	object("shop/templates/migrate.yaml", "ConfigMap", "migrate", AnnotationResourceGroup, "migrate", AnnotationDependsOnGroups, `["db"]`) +
	object("shop/templates/app.yaml", "ConfigMap", "app", AnnotationResourceGroup, "app", AnnotationDependsOnGroups, `["migrate"]`) +
	object("shop/templates/plain.yaml", "ConfigMap", "plain")

func newClient(f *fakeKube, opts Options) *Client {
	if opts.Deadline.IsZero() {
		opts.Deadline = time.Now().Add(time.Minute)
	}
	if opts.Get == nil {
		opts.Get = f.GetObject
	}
	return Wrap(f, opts)
}

func build(t *testing.T, c *Client, manifest string) kube.ResourceList {
	t.Helper()
	list, err := c.Build(strings.NewReader(manifest), false)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return list
}

func wantCalls(t *testing.T, f *fakeKube, want ...string) {
	t.Helper()
	if got := f.Calls(); !slices.Equal(got, want) {
		t.Errorf("calls\n got: %q\nwant: %q", got, want)
	}
}

func TestCreateAppliesBatchByBatch(t *testing.T) {
	f := &fakeKube{}
	var seen []string
	c := newClient(f, Options{Observer: func(p Progress) {
		seen = append(seen, fmt.Sprintf("%d/%d %s %s", p.Index, p.Total, p.Batch, p.Phase))
	}})
	res, err := c.Create(build(t, c, shopManifest))
	if err != nil {
		t.Fatal(err)
	}
	// The app group is not waited for: nothing needs it; the action's own
	// wait covers it, as the unsequenced resources.
	wantCalls(t, f, "create db", "wait db", "create migrate", "wait migrate", "create app", "create plain")
	if len(res.Created) != 4 {
		t.Errorf("result lists %d created objects, want all 4", len(res.Created))
	}
	wantSeen := []string{
		"1/4 db applying", "1/4 db waiting", "1/4 db ready",
		"2/4 migrate applying", "2/4 migrate waiting", "2/4 migrate ready",
		"3/4 app applying", "3/4 app applied",
		"4/4 unsequenced applying", "4/4 unsequenced applied",
	}
	if !slices.Equal(seen, wantSeen) {
		t.Errorf("progress\n got: %q\nwant: %q", seen, wantSeen)
	}
}

func TestHooksPassThrough(t *testing.T) {
	f := &fakeKube{}
	c := newClient(f, Options{})
	build(t, c, shopManifest)
	// Helm builds each hook from its own manifest, without a source line.
	hook := build(t, c, "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: hook\n  annotations:\n    helm.sh/resource-group: db\n")
	if _, err := c.Create(hook); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, f, "create hook")
}

func TestFailedBatchStopsTheApply(t *testing.T) {
	f := &fakeKube{notReady: "migrate"}
	c := newClient(f, Options{})
	res, err := c.Create(build(t, c, shopManifest))
	if err == nil || !strings.Contains(err.Error(), "resource group migrate (2/4)") || !strings.Contains(err.Error(), "resource migrate not ready") {
		t.Fatalf("error = %v, want it to name the group and what is not ready", err)
	}
	wantCalls(t, f, "create db", "wait db", "create migrate", "wait migrate")
	if len(res.Created) != 2 {
		t.Errorf("result lists %d created objects, want the 2 applied (for cleanupOnFail)", len(res.Created))
	}
}

func TestDeadlineBoundsTheWholeApply(t *testing.T) {
	f := &fakeKube{}
	c := newClient(f, Options{Deadline: time.Now().Add(-time.Second)})
	_, err := c.Create(build(t, c, shopManifest))
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "resource group db (1/4)") {
		t.Fatalf("error = %v, want a timeout naming the first group", err)
	}
	wantCalls(t, f, "create db")
}

func TestCycleAppliesNothing(t *testing.T) {
	f := &fakeKube{}
	c := newClient(f, Options{})
	manifest := object("shop/templates/a.yaml", "ConfigMap", "a", AnnotationResourceGroup, "a", AnnotationDependsOnGroups, `["b"]`) +
		object("shop/templates/b.yaml", "ConfigMap", "b", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`)
	_, err := c.Create(build(t, c, manifest))
	var cycle *CycleError
	if !errors.As(err, &cycle) {
		t.Fatalf("error = %v, want a cycle", err)
	}
	wantCalls(t, f)
}

func TestUpdateKeepsTheOrderAndDeletesRemovedInReverse(t *testing.T) {
	f := &fakeKube{}
	c := newClient(f, Options{})
	previous := shopManifest +
		object("shop/templates/old-db.yaml", "ConfigMap", "old-db", AnnotationResourceGroup, "db") +
		object("shop/templates/old-app.yaml", "ConfigMap", "old-app", AnnotationResourceGroup, "app", AnnotationDependsOnGroups, `["migrate"]`)
	original := build(t, c, previous)
	target := build(t, c, shopManifest)
	if _, err := c.Update(original, target); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, f,
		"update db", "wait db", "update migrate", "wait migrate", "update app", "update plain",
		// Removed: the app group's object first, gone, then the db group's.
		"delete old-app", "gone old-app", "delete old-db")
}

func TestDeleteInReverseAfterLearningTheManifest(t *testing.T) {
	f := &fakeKube{}
	c := newClient(f, Options{})
	if err := c.Learn(shopManifest); err != nil {
		t.Fatal(err)
	}
	// Uninstall builds from the manifest with the source lines removed.
	var stripped []string
	for _, line := range strings.Split(shopManifest, "\n") {
		if !strings.HasPrefix(line, sourcePrefix) {
			stripped = append(stripped, line)
		}
	}
	list := build(t, c, strings.Join(stripped, "\n"))
	if _, errs := c.Delete(list, metav1.DeletePropagationBackground); len(errs) > 0 {
		t.Fatal(errs)
	}
	wantCalls(t, f, "delete plain", "gone plain", "delete app", "gone app", "delete migrate", "gone migrate", "delete db")
}

func TestWarningsAreGivenOnce(t *testing.T) {
	f := &fakeKube{}
	var warnings []string
	c := newClient(f, Options{Warn: func(w string) { warnings = append(warnings, w) }})
	manifest := shopManifest + object("shop/templates/lost.yaml", "ConfigMap", "lost", AnnotationDependsOnGroups, `["nope"]`)
	list := build(t, c, manifest)
	for range 2 {
		if _, err := c.Create(list); err != nil {
			t.Fatal(err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "ConfigMap/ns/lost") {
		t.Errorf("warnings = %q, want one naming ConfigMap/ns/lost", warnings)
	}
}

func TestCustomReadinessDecides(t *testing.T) {
	job := func(annotations ...string) string {
		return object("shop/templates/db.yaml", "ConfigMap", "db", AnnotationResourceGroup, "db") +
			object("shop/templates/job.yaml", "Job", "migrate", append([]string{AnnotationResourceGroup, "migrate", AnnotationDependsOnGroups, `["db"]`}, annotations...)...) +
			object("shop/templates/app.yaml", "ConfigMap", "app", AnnotationResourceGroup, "app", AnnotationDependsOnGroups, `["migrate"]`)
	}
	judgedBoth := job(AnnotationReadinessSuccess, `["{.succeeded} >= 1"]`, AnnotationReadinessFailure, `["{.failed} >= 1"]`)
	statusAfter := func(polls int, status map[string]any) func(*resource.Info) (runtime.Object, error) {
		var mu sync.Mutex
		n := 0
		return func(info *resource.Info) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			u := &unstructured.Unstructured{Object: map[string]any{"kind": "Job", "metadata": map[string]any{"name": info.Name}}}
			u.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Job"})
			if n++; n > polls {
				u.Object["status"] = status
			}
			return u, nil
		}
	}
	t.Run("success after a few polls, not by the waiter", func(t *testing.T) {
		f := &fakeKube{notReady: "migrate"} // the standard waiter would fail it
		c := newClient(f, Options{PollInterval: time.Millisecond, Get: statusAfter(3, map[string]any{"succeeded": int64(1)})})
		if _, err := c.Create(build(t, c, judgedBoth)); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, f, "create db", "wait db", "create migrate", "create app")
	})
	// Helm's (or afterHooks') final wait goes through the same client:
	// there too the expressions decide for a resource that has them, and
	// the waiter asked for judges the rest; a Job is held to both.
	t.Run("the final wait judges by the expressions too", func(t *testing.T) {
		judgedResource := object("shop/templates/db.yaml", "Database", "db", AnnotationResourceGroup, "db",
			AnnotationReadinessSuccess, `["{.phase} == Running"]`, AnnotationReadinessFailure, `["{.phase} == Failed"]`) +
			object("shop/templates/app.yaml", "ConfigMap", "app", AnnotationResourceGroup, "app", AnnotationDependsOnGroups, `["db"]`)
		f := &fakeKube{notReady: "db"} // kstatus would never pass it
		c := newClient(f, Options{PollInterval: time.Millisecond, Get: statusAfter(3, map[string]any{"phase": "Running"})})
		list := build(t, c, judgedResource)
		if _, err := c.Create(list); err != nil {
			t.Fatal(err)
		}
		waiter, err := c.GetWaiterWithOptions(kube.StatusWatcherStrategy)
		if err != nil {
			t.Fatal(err)
		}
		if err := waiter.Wait(list, time.Second); err != nil {
			t.Fatalf("final wait = %v, want the Database judged by its success expression", err)
		}
		if !f.called("wait app") || f.called("wait app db") {
			t.Errorf("calls %q, want only app waited for by the waiter", f.Calls())
		}
		f.notReady = "app"
		if err := waiter.WaitWithJobs(list, time.Second); err == nil || !strings.Contains(err.Error(), "app") {
			t.Errorf("final wait with jobs = %v, want the waiter's failure of app", err)
		}

		// A Job whose success expression is true must still complete.
		f = &fakeKube{notReady: "migrate"}
		c = newClient(f, Options{PollInterval: time.Millisecond, Get: statusAfter(0, map[string]any{"succeeded": int64(1)})})
		list = build(t, c, judgedBoth)
		if waiter, err = c.GetWaiterWithOptions(kube.StatusWatcherStrategy); err != nil {
			t.Fatal(err)
		}
		if err := waiter.WaitWithJobs(list, time.Second); err == nil || !strings.Contains(err.Error(), "migrate") {
			t.Errorf("final wait = %v, want the Job held to the waiter too", err)
		}
	})
	t.Run("a failure condition fails the batch and names it", func(t *testing.T) {
		f := &fakeKube{}
		c := newClient(f, Options{PollInterval: time.Millisecond, Get: statusAfter(1, map[string]any{"failed": int64(1), "succeeded": int64(1)})})
		_, err := c.Create(build(t, c, judgedBoth))
		if err == nil || !strings.HasPrefix(err.Error(), "failed early due to stalled resources: [Job/ns/migrate status: 'Failed']") || !strings.Contains(err.Error(), "{.failed} >= 1") {
			t.Fatalf("error = %v, want the failure condition named", err)
		}
		wantCalls(t, f, "create db", "wait db", "create migrate")
	})
	t.Run("not ready by the deadline", func(t *testing.T) {
		f := &fakeKube{}
		c := newClient(f, Options{PollInterval: time.Millisecond, Deadline: time.Now().Add(200 * time.Millisecond), Get: statusAfter(1<<30, nil)})
		_, err := c.Create(build(t, c, judgedBoth))
		if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "Job/ns/migrate") {
			t.Fatalf("error = %v, want a timeout naming Job/migrate", err)
		}
	})
	// A Job with ttlSecondsAfterFinished that is gone is judged on the
	// last state the kube client's tracker saw of it: a poll every 2 s
	// misses most Jobs that fail and delete themselves at once.
	migrate := object("shop/templates/job.yaml", "Job", "migrate", AnnotationResourceGroup, "migrate", AnnotationDependsOnGroups, `["db"]`,
		AnnotationReadinessSuccess, `["{.succeeded} >= 1"]`, AnnotationReadinessFailure, `["{.failed} >= 1"]`)
	migrate = strings.Replace(migrate, "apiVersion: v1\n", "apiVersion: batch/v1\n", 1) + "spec:\n  ttlSecondsAfterFinished: 0\n"
	ttlJob := object("shop/templates/db.yaml", "ConfigMap", "db", AnnotationResourceGroup, "db") + migrate +
		object("shop/templates/app.yaml", "ConfigMap", "app", AnnotationResourceGroup, "app", AnnotationDependsOnGroups, `["migrate"]`)
	gone := func(info *resource.Info) (runtime.Object, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, info.Name)
	}
	finishedJob := func(status map[string]any, condition string) *unstructured.Unstructured {
		status["conditions"] = []any{map[string]any{"type": condition, "status": "True"}}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": "migrate", "namespace": "ns"},
			"status":   status,
		}}
	}
	goneJobs := []struct {
		name string
		// seen is the last state the tracker saw; nil: it saw none.
		seen      *unstructured.Unstructured
		wantErr   string
		wantCalls []string
	}{
		{
			name:      "seen complete, then gone: done",
			seen:      finishedJob(map[string]any{"succeeded": int64(1)}, "Complete"),
			wantCalls: []string{"create db", "wait db", "create migrate", "create app"},
		},
		{
			name:      "seen failed, then gone: the batch fails",
			seen:      finishedJob(map[string]any{"failed": int64(1)}, "Failed"),
			wantErr:   "its failure condition",
			wantCalls: []string{"create db", "wait db", "create migrate"},
		},
		{
			name:      "gone, nothing saw it finish: the batch fails",
			wantErr:   "whether it succeeded is unknown",
			wantCalls: []string{"create db", "wait db", "create migrate"},
		},
	}
	for _, tc := range goneJobs {
		t.Run("a Job with ttlSecondsAfterFinished, "+tc.name, func(t *testing.T) {
			f := &fakeKube{jobs: jobttl.NewTracker()}
			if tc.seen != nil {
				f.jobs.Saw(tc.seen)
			}
			c := newClient(f, Options{PollInterval: time.Millisecond, Deadline: time.Now().Add(5 * time.Second), Get: gone})
			_, err := c.Create(build(t, c, ttlJob))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("a Job that completed and was deleted held the batch: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "Job/ns/migrate")):
				t.Fatalf("error = %v, want one naming Job/ns/migrate with %q", err, tc.wantErr)
			}
			wantCalls(t, f, tc.wantCalls...)
		})
	}
	t.Run("a Job without ttlSecondsAfterFinished that is gone is waited for", func(t *testing.T) {
		f := &fakeKube{}
		gone := func(info *resource.Info) (runtime.Object, error) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "batch", Resource: "jobs"}, info.Name)
		}
		c := newClient(f, Options{PollInterval: time.Millisecond, Deadline: time.Now().Add(200 * time.Millisecond), Get: gone})
		if _, err := c.Create(build(t, c, judgedBoth)); err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("error = %v, want a timeout", err)
		}
	})
	t.Run("one annotation alone keeps kstatus, with a warning", func(t *testing.T) {
		f := &fakeKube{}
		var warnings []string
		c := newClient(f, Options{Warn: func(w string) { warnings = append(warnings, w) }})
		if _, err := c.Create(build(t, c, job(AnnotationReadinessSuccess, `["{.succeeded} >= 1"]`))); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, f, "create db", "wait db", "create migrate", "wait migrate", "create app")
		if len(warnings) != 1 || !strings.Contains(warnings[0], "Job/ns/migrate") || !strings.Contains(warnings[0], AnnotationReadinessFailure) {
			t.Errorf("warnings = %q, want one naming Job/migrate and the missing annotation", warnings)
		}
	})
}

// keptManifest is the shop release with an object of the app group that
// Helm keeps when it is dropped, and one of the db group.
var keptManifest = shopManifest +
	object("shop/templates/kept.yaml", "ConfigMap", "kept", AnnotationResourceGroup, "app", AnnotationDependsOnGroups, `["migrate"]`,
		kube.ResourcePolicyAnno, kube.KeepPolicy) +
	object("shop/templates/old-db.yaml", "ConfigMap", "old-db", AnnotationResourceGroup, "db")

func TestUpgradeDroppingAKeptObjectDoesNotWaitForIt(t *testing.T) {
	f := &fakeKube{}
	c := newClient(f, Options{Deadline: time.Now().Add(5 * time.Second)})
	original := build(t, c, keptManifest)
	f.setExists(original)
	target := build(t, c, shopManifest)
	began := time.Now()
	if _, err := c.Update(original, target); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("the upgrade took %s: it waited for the kept object to go", took)
	}
	wantCalls(t, f,
		"update db", "wait db", "update migrate", "wait migrate", "update app", "update plain",
		// The kept object is not deleted, so not waited for; the db
		// group's removal comes after the app group's all the same.
		"keep kept", "delete old-db")
}

// threeGroups is a release of three groups in a chain, each of one
// ConfigMap named after its group, and a ConfigMap without a group.
var threeGroups = object("shop/templates/a.yaml", "ConfigMap", "a", AnnotationResourceGroup, "a") +
	object("shop/templates/b.yaml", "ConfigMap", "b", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`) +
	object("shop/templates/c.yaml", "ConfigMap", "c", AnnotationResourceGroup, "c", AnnotationDependsOnGroups, `["b"]`)

// uninstall deletes the release of manifest as Helm's uninstall does: the
// objects, then its wait for their deletion with the action's timeout.
func uninstall(t *testing.T, f *fakeKube, c *Client, manifest string, timeout time.Duration) (deleteErrs []error, waitErr error) {
	t.Helper()
	return uninstallWaiting(t, f, c, manifest, timeout, kube.StatusWatcherStrategy)
}

// uninstallWaiting is uninstall with the wait strategy Helm's uninstall
// asks its waiter for: hookOnly under spec.uninstall.disableWait.
func uninstallWaiting(t *testing.T, f *fakeKube, c *Client, manifest string, timeout time.Duration, ws kube.WaitStrategy) (deleteErrs []error, waitErr error) {
	t.Helper()
	if err := c.Learn(manifest); err != nil {
		t.Fatal(err)
	}
	list := build(t, c, manifest)
	f.setExists(list)
	res, errs := c.Delete(list, metav1.DeletePropagationBackground)
	waiter, err := c.GetWaiterWithOptions(ws)
	if err != nil {
		t.Fatal(err)
	}
	return errs, waiter.WaitForDelete(res.Deleted, timeout)
}

func TestUninstallGoesOnPastAStuckBatch(t *testing.T) {
	f := &fakeKube{held: map[string]bool{"b": true}}
	var mu sync.Mutex
	var seen []string
	timeout := time.Second
	c := newClient(f, Options{Deadline: time.Now().Add(timeout), Get: f.GetObject, Observer: func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %s %s", p.Batch, p.Phase, p.Detail))
	}})
	began := time.Now()
	deleteErrs, waitErr := uninstall(t, f, c, threeGroups, timeout)
	took := time.Since(began)
	if len(deleteErrs) > 0 {
		t.Errorf("Delete errors %v: a deletion under way is not an error of the delete", deleteErrs)
	}
	// c goes first and is gone; b stays; a is deleted all the same.
	for _, call := range []string{"delete c", "gone c", "delete b", "gone b", "delete a"} {
		if !f.called(call) {
			t.Errorf("calls %q, want %q among them", f.Calls(), call)
		}
	}
	if f.present("a") || f.present("c") {
		t.Errorf("a or c left behind: the batches before a stuck one are deleted too")
	}
	if waitErr == nil || !strings.Contains(waitErr.Error(), "ConfigMap/ns/b: held by finalizer(s) example.com/block") {
		t.Errorf("wait for deletion = %v, want it to name the object left and its finalizer", waitErr)
	}
	if took > timeout+time.Second {
		t.Errorf("the uninstall took %s, want it over within its timeout of %s", took, timeout)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(seen, func(s string) bool {
		return strings.HasPrefix(s, "b stuck") && strings.Contains(s, "ConfigMap/ns/b: held by finalizer(s) example.com/block")
	}) {
		t.Errorf("progress %q, want batch b reported stuck with what holds it", seen)
	}
}

// Under spec.uninstall.disableWait Helm asks for the hookOnly waiter: the
// batches are still deleted in order, but an object a finalizer holds does
// not fail the uninstall afterwards, as it does not upstream.
func TestUninstallWithoutWaitDoesNotFailOnAHeldObject(t *testing.T) {
	f := &fakeKube{held: map[string]bool{"b": true}}
	timeout := time.Second
	c := newClient(f, Options{Deadline: time.Now().Add(timeout), Get: f.GetObject})
	deleteErrs, waitErr := uninstallWaiting(t, f, c, threeGroups, timeout, kube.HookOnlyStrategy)
	if len(deleteErrs) > 0 {
		t.Errorf("Delete errors %v", deleteErrs)
	}
	if waitErr != nil {
		t.Errorf("wait for deletion under disableWait = %v, want nil: Helm asked not to wait", waitErr)
	}
	for _, call := range []string{"delete c", "delete b", "delete a"} {
		if !f.called(call) {
			t.Errorf("calls %q, want %q among them", f.Calls(), call)
		}
	}
}

func TestUninstallGoesOnPastARefusedDeletion(t *testing.T) {
	f := &fakeKube{refused: map[string]bool{"b": true}}
	c := newClient(f, Options{Get: f.GetObject})
	deleteErrs, _ := uninstall(t, f, c, threeGroups, time.Minute)
	if err := errors.Join(deleteErrs...); err == nil || !strings.Contains(err.Error(), "resource group b (2/3)") || !strings.Contains(err.Error(), "ConfigMap/ns/b: b is forbidden") {
		t.Errorf("Delete errors = %v, want the refused object named with its group", err)
	}
	if f.present("a") || f.present("c") {
		t.Errorf("a or c left behind: the other batches are deleted all the same")
	}
	if !f.present("b") {
		t.Errorf("b is gone, yet its deletion was refused")
	}
}

// siblings is a release of two subcharts without an order between them,
// each a chain of two groups.
var siblings = object("shop/charts/slow/templates/a.yaml", "ConfigMap", "slow-a", AnnotationResourceGroup, "a") +
	object("shop/charts/slow/templates/b.yaml", "ConfigMap", "slow-b", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`) +
	object("shop/charts/fast/templates/a.yaml", "ConfigMap", "fast-a", AnnotationResourceGroup, "a") +
	object("shop/charts/fast/templates/b.yaml", "ConfigMap", "fast-b", AnnotationResourceGroup, "b", AnnotationDependsOnGroups, `["a"]`)

func TestSiblingSubchartsProgressIndependently(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeKube{gates: map[string]chan struct{}{"slow-a": gate}}
	c := newClient(f, Options{Charts: Charts{"shop": {OrderDeclared: true}}})
	list := build(t, c, siblings)
	done := make(chan error, 1)
	go func() {
		_, err := c.Create(list)
		done <- err
	}()
	// The fast subchart goes all the way while the slow one's first
	// group is not ready.
	deadline := time.Now().Add(5 * time.Second)
	for !f.called("create fast-b") {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("calls %q: the fast subchart waited for the slow one", f.Calls())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if f.called("create slow-b") {
		t.Errorf("calls %q: slow-b applied before slow-a was ready", f.Calls())
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !f.called("create slow-b") {
		t.Errorf("calls %q: slow-b never applied", f.Calls())
	}
}

func TestAFailureStopsWhatHasNotStarted(t *testing.T) {
	f := &fakeKube{notReady: "fast-a", gates: map[string]chan struct{}{"slow-a": make(chan struct{})}}
	c := newClient(f, Options{Charts: Charts{"shop": {OrderDeclared: true}}})
	began := time.Now()
	_, err := c.Create(build(t, c, siblings))
	if err == nil || !strings.Contains(err.Error(), "resource group fast/a") || !strings.Contains(err.Error(), "resource fast-a not ready") {
		t.Fatalf("error = %v, want the failed group's", err)
	}
	if f.called("create fast-b") || f.called("create slow-b") {
		t.Errorf("calls %q: a batch started after the failure", f.Calls())
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Create took %s: the sibling's wait went on after the failure", took)
	}
}

func TestReadinessTimeoutBoundsEachBatch(t *testing.T) {
	f := &fakeKube{gates: map[string]chan struct{}{"db": make(chan struct{})}}
	c := newClient(f, Options{ReadinessTimeout: 100 * time.Millisecond})
	began := time.Now()
	_, err := c.Create(build(t, c, shopManifest))
	if err == nil || !strings.Contains(err.Error(), "resource group db (1/4)") || !strings.Contains(err.Error(), "readiness timeout of 100ms") {
		t.Fatalf("error = %v, want the readiness timeout named for the db group", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("Create took %s, want the readiness timeout to end it", took)
	}
}

func TestPlannedAndWhatABatchWaitsFor(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeKube{gates: map[string]chan struct{}{"db": gate}}
	var planned []Planned
	details := make(chan string, 100)
	deployment := func(info *resource.Info) (runtime.Object, error) {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": info.Name, "generation": int64(1)},
			"spec":     map[string]any{"replicas": int64(1)},
			"status":   map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "readyReplicas": int64(0)},
		}}, nil
	}
	c := newClient(f, Options{PollInterval: 10 * time.Millisecond, Get: deployment,
		Planned: func(p Planned) { planned = append(planned, p) },
		Observer: func(p Progress) {
			if p.Phase == PhaseWaiting && p.Detail != "" {
				details <- p.Detail
			}
		}})
	done := make(chan error, 1)
	go func() {
		_, err := c.Create(build(t, c, shopManifest))
		done <- err
	}()
	select {
	case d := <-details:
		if !strings.HasPrefix(d, "ConfigMap/ns/db: ") || !strings.Contains(d, "0/1") {
			t.Errorf("waiting detail %q, want the object and what kstatus says of it", d)
		}
	case <-time.After(5 * time.Second):
		t.Error("no detail on what the db group waits for")
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(planned) != 1 || planned[0].Deleting || len(planned[0].Plan.Batches) != 4 || planned[0].Plan.Batches[1].Name != "migrate" {
		t.Errorf("planned %+v, want the plan of the apply once", planned)
	}
}
