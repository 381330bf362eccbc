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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"
)

// fakeKube is a Helm kube client that records what it is asked to do, in
// order, as "create a b", "update a b", "delete a b", "wait a b" and
// "gone a b" (object names, sorted).
type fakeKube struct {
	kube.Interface
	mu    sync.Mutex
	calls []string
	// notReady makes the wait of a list holding this object fail.
	notReady string
}

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
	return &kube.Result{Created: list}, nil
}

func (f *fakeKube) Update(original, target kube.ResourceList, _ ...kube.ClientUpdateOption) (*kube.Result, error) {
	res := &kube.Result{}
	if len(target) > 0 {
		f.record("update", target)
		res.Updated = target
	}
	if gone := original.Difference(target); len(gone) > 0 {
		f.record("delete", gone)
		res.Deleted = gone
	}
	return res, nil
}

func (f *fakeKube) Delete(list kube.ResourceList, _ metav1.DeletionPropagation) (*kube.Result, []error) {
	f.record("delete", list)
	return &kube.Result{Deleted: list}, nil
}

func (f *fakeKube) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return f.GetWaiterWithOptions(ws)
}

func (f *fakeKube) GetWaiterWithOptions(kube.WaitStrategy, ...kube.WaitOption) (kube.Waiter, error) {
	return fakeWaiter{f}, nil
}

type fakeWaiter struct{ f *fakeKube }

func (w fakeWaiter) Wait(list kube.ResourceList, _ time.Duration) error {
	w.f.record("wait", list)
	for _, info := range list {
		if info.Name == w.f.notReady {
			return fmt.Errorf("resource %s not ready", info.Name)
		}
	}
	return nil
}

func (w fakeWaiter) WaitWithJobs(list kube.ResourceList, timeout time.Duration) error {
	return w.Wait(list, timeout)
}

func (w fakeWaiter) WaitForDelete(list kube.ResourceList, _ time.Duration) error {
	w.f.record("gone", list)
	return nil
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
	wantCalls(t, f, "create db", "wait db", "create migrate", "wait migrate", "create app", "wait app", "create plain")
	if len(res.Created) != 4 {
		t.Errorf("result lists %d created objects, want all 4", len(res.Created))
	}
	wantSeen := []string{
		"1/4 db applying", "1/4 db waiting", "1/4 db ready",
		"2/4 migrate applying", "2/4 migrate waiting", "2/4 migrate ready",
		"3/4 app applying", "3/4 app waiting", "3/4 app ready",
		"4/4 unsequenced applying",
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
		"update db", "wait db", "update migrate", "wait migrate", "update app", "wait app", "update plain",
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
		wantCalls(t, f, "create db", "wait db", "create migrate", "create app", "wait app")
	})
	t.Run("a failure condition fails the batch and names it", func(t *testing.T) {
		f := &fakeKube{}
		c := newClient(f, Options{PollInterval: time.Millisecond, Get: statusAfter(1, map[string]any{"failed": int64(1), "succeeded": int64(1)})})
		_, err := c.Create(build(t, c, judgedBoth))
		if err == nil || !strings.Contains(err.Error(), "Job/ns/migrate failed") || !strings.Contains(err.Error(), "{.failed} >= 1") {
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
	t.Run("one annotation alone keeps kstatus, with a warning", func(t *testing.T) {
		f := &fakeKube{}
		var warnings []string
		c := newClient(f, Options{Warn: func(w string) { warnings = append(warnings, w) }})
		if _, err := c.Create(build(t, c, job(AnnotationReadinessSuccess, `["{.succeeded} >= 1"]`))); err != nil {
			t.Fatal(err)
		}
		wantCalls(t, f, "create db", "wait db", "create migrate", "wait migrate", "create app", "wait app")
		if len(warnings) != 1 || !strings.Contains(warnings[0], "Job/ns/migrate") || !strings.Contains(warnings[0], AnnotationReadinessFailure) {
			t.Errorf("warnings = %q, want one naming Job/migrate and the missing annotation", warnings)
		}
	})
}
