package framework

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	batchclient "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// JobRun is one Job object, as a JobRecorder saw it: one run of a hook
// whose Job is deleted before or after it runs.
type JobRun struct {
	UID     types.UID
	Created time.Time
	// Succeeded and Failed are the highest counts the Job's status
	// reported.
	Succeeded, Failed int32
	// Deleted is true once the Job is gone.
	Deleted bool
}

// JobRecorder watches the Jobs of a namespace and keeps every Job object
// it saw, deleted ones included, so that a test can count how often a
// hook ran even when Helm deletes its Job after the run or before the
// next one.
type JobRecorder struct {
	mu   sync.Mutex
	runs map[string][]*JobRun // by Job name, oldest first
	byID map[types.UID]*JobRun
	err  error
}

// RecordJobs starts recording the Jobs of ns until the test ends. Start it
// before anything creates Jobs there.
func (e *Env) RecordJobs(t testing.TB, ns string) *JobRecorder {
	t.Helper()
	jobs, err := batchclient.NewForConfig(e.Cluster.RESTConfig())
	if err != nil {
		t.Fatalf("creating the Job client: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := jobs.Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatalf("listing Jobs: %v", err)
	}
	r := &JobRecorder{runs: map[string][]*JobRun{}, byID: map[types.UID]*JobRun{}}
	for i := range list.Items {
		r.observe(&list.Items[i], false)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.AllowWatchBookmarks = true
			return jobs.Jobs(ns).Watch(ctx, opts)
		},
	})
	if err != nil {
		cancel()
		t.Fatalf("watching Jobs: %v", err)
	}
	go func() {
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if job, ok := ev.Object.(*batchv1.Job); ok {
					r.observe(job, ev.Type == watch.Deleted)
				}
			case watch.Error:
				r.mu.Lock()
				if r.err == nil {
					r.err = fmt.Errorf("watching Jobs: %v", apierrors.FromObject(ev.Object))
				}
				r.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-w.Done()
	})
	return r
}

func (r *JobRecorder) observe(job *batchv1.Job, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	run, ok := r.byID[job.UID]
	if !ok {
		run = &JobRun{UID: job.UID, Created: job.CreationTimestamp.Time}
		r.byID[job.UID] = run
		r.runs[job.Name] = append(r.runs[job.Name], run)
	}
	run.Succeeded = max(run.Succeeded, job.Status.Succeeded)
	run.Failed = max(run.Failed, job.Status.Failed)
	run.Deleted = run.Deleted || deleted
}

// Runs returns the Job objects named name seen so far, oldest first.
func (r *JobRecorder) Runs(name string) []JobRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]JobRun, 0, len(r.runs[name]))
	for _, run := range r.runs[name] {
		out = append(out, *run)
	}
	return out
}

// Err returns the error that broke the recording, if any: then Runs may
// miss Jobs.
func (r *JobRecorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
