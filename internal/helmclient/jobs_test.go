package helmclient

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmkube "helm.sh/helm/v4/pkg/kube"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
)

func jobObject(t *testing.T, conditions ...batchv1.JobConditionType) *unstructured.Unstructured {
	t.Helper()
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: "app", ResourceVersion: "7"},
	}
	for _, c := range conditions {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: c, Status: corev1.ConditionTrue, Reason: "Test"})
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: content}
}

// TestGoneJob is the rule for a self-deleting Job that is gone: as it
// finished when its last known state shows it finished, failed with an
// unknown outcome otherwise, never complete for want of knowing.
func TestGoneJob(t *testing.T) {
	manifest := jobObject(t)
	terminating := jobObject(t, batchv1.JobFailureTarget, batchv1.JobFailed)
	now := metav1.Now()
	terminating.SetDeletionTimestamp(&now)
	terminating.SetFinalizers([]string{metav1.FinalizerDeleteDependents})
	succeeded := jobObject(t, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)
	_ = unstructured.SetNestedField(succeeded.Object, int64(3), "status", "succeeded")

	tests := []struct {
		name       string
		last       *unstructured.Unstructured
		wantFailed bool
		wantReason string
		// wantSucceeded is status.succeeded of the stand-in.
		wantSucceeded int64
	}{
		{name: "gone and never seen", last: nil, wantFailed: true, wantReason: unknownReason},
		{name: "seen running, then gone", last: jobObject(t), wantFailed: true, wantReason: unknownReason},
		{name: "seen complete, then gone", last: succeeded, wantReason: "Test", wantSucceeded: 3},
		{name: "seen failed, then gone", last: jobObject(t, batchv1.JobFailureTarget, batchv1.JobFailed), wantFailed: true},
		{name: "seen failed while being deleted, then gone", last: terminating, wantFailed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := goneJob(manifest, tc.last, "42")
			if f := jobttl.HasCondition(got, batchv1.JobFailed); f != tc.wantFailed {
				t.Errorf("Failed condition %v, want %v", f, tc.wantFailed)
			}
			if c := jobttl.HasCondition(got, batchv1.JobComplete); c == tc.wantFailed {
				t.Errorf("Complete condition %v, want %v", c, !tc.wantFailed)
			}
			if n, _, _ := unstructured.NestedInt64(got.Object, "status", "succeeded"); n != tc.wantSucceeded {
				t.Errorf("status.succeeded %d, want %d: a healthCheckExprs rule reads the Job as it ended", n, tc.wantSucceeded)
			}
			if tc.wantReason != "" && !strings.Contains(fmt.Sprint(got.Object["status"]), tc.wantReason) {
				t.Errorf("status %v, want the reason %s", got.Object["status"], tc.wantReason)
			}
			if got.GetDeletionTimestamp() != nil || len(got.GetFinalizers()) > 0 {
				t.Error("the stand-in is still being deleted: kstatus would count it Terminating")
			}
			if got.GetResourceVersion() != "42" || got.GetName() != "migrate" || got.GetKind() != "Job" {
				t.Errorf("stand-in %s %s at %s, want Job migrate at 42", got.GetKind(), got.GetName(), got.GetResourceVersion())
			}
		})
	}
	if manifest.GetResourceVersion() != "7" {
		t.Error("goneJob changed the manifest it was given")
	}
}

// TestOnlyJobsWithTTLGetStandIns: upstream's rule, a Job counts as done
// when gone only if its manifest sets ttlSecondsAfterFinished.
func TestOnlyJobsWithTTLGetStandIns(t *testing.T) {
	jobs := newSelfDeletingJobs(nil)
	key := resourceNamespace{resource: schema.GroupResource{Group: "batch", Resource: "jobs"}, namespace: "app"}
	info := func(gvk schema.GroupVersionKind, obj runtime.Object) *resource.Info {
		return &resource.Info{Name: "x", Object: obj, Mapping: &meta.RESTMapping{GroupVersionKind: gvk}}
	}
	gvk := batchv1.SchemeGroupVersion.WithKind("Job")
	zero := int32(0)
	jobs.add(key, info(gvk, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "ttl"}, Spec: batchv1.JobSpec{TTLSecondsAfterFinished: &zero}}))
	jobs.add(key, info(gvk, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}))
	jobs.add(key, info(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Job"}, jobObject(t)))
	if !jobs.covers(key, "ttl") {
		t.Error("a Job with ttlSecondsAfterFinished: 0 gets no stand-in")
	}
	if jobs.covers(key, "kept") || jobs.covers(key, "migrate") {
		t.Error("a Job without ttlSecondsAfterFinished, or another kind named Job, gets a stand-in")
	}
	if got := jobs.standIn(context.Background(), key, "ttl", "1"); got.GetKind() != "Job" || got.GetAPIVersion() != "batch/v1" {
		t.Errorf("stand-in of a typed manifest is %s %s: kstatus would not match it to the Job", got.GetAPIVersion(), got.GetKind())
	}
	var none *selfDeletingJobs
	if none.covers(key, "ttl") {
		t.Error("a wait for deletion gives stand-ins")
	}
}

// The tests below run Helm's waiter through the narrowed client against a
// real API server. envtest runs no Job or TTL controller: the test writes
// the Job status they would write and deletes the Job as the TTL
// controller does.

func jobManifest(name string, ttl bool) string {
	ttlLine := ""
	if ttl {
		ttlLine = "  ttlSecondsAfterFinished: 0\n"
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
spec:
%s  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: run
        image: example.invalid/run:1
`, name, ttlLine)
}

// applier is who applies a test's objects.
type applier int

const (
	appliedHere applier = iota
	appliedElsewhere
)

// createElsewhere creates list with a client of its own, as an earlier
// run of the controller would have: the client under test did not apply
// it and tracks none of its Jobs.
func (c *waitCluster) createElsewhere(t *testing.T, list helmkube.ResourceList) {
	t.Helper()
	other := NewClient(c.getter, NewFieldValidation())
	other.Namespace = c.ns
	if _, err := other.Create(list); err != nil {
		t.Fatal(err)
	}
}

// jobOutcome is what the test makes of a Job: still running, complete or
// failed.
type jobOutcome int

const (
	jobRunning jobOutcome = iota
	jobComplete
	jobFailed
)

// setJob writes the status the Job controller writes for outcome.
func (c *waitCluster) setJob(t *testing.T, name string, outcome jobOutcome) {
	t.Helper()
	ctx := context.Background()
	job, err := c.cs.BatchV1().Jobs(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := metav1.NewTime(time.Now().Add(-time.Second))
	if job.Status.StartTime != nil {
		start = *job.Status.StartTime
	}
	now := metav1.Now()
	condition := func(t batchv1.JobConditionType) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "Test", LastProbeTime: now, LastTransitionTime: now}
	}
	job.Status = batchv1.JobStatus{StartTime: &start}
	switch outcome {
	case jobRunning:
		job.Status.Active = 1
	case jobComplete:
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobSuccessCriteriaMet), condition(batchv1.JobComplete)}
	case jobFailed:
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{condition(batchv1.JobFailureTarget), condition(batchv1.JobFailed)}
	}
	if _, err := c.cs.BatchV1().Jobs(c.ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteJob deletes the Job as its TTL has it deleted.
func (c *waitCluster) deleteJob(t *testing.T, name string) {
	t.Helper()
	background := metav1.DeletePropagationBackground
	if err := c.cs.BatchV1().Jobs(c.ns).Delete(context.Background(), name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
}

// TestSelfDeletingJobsUnderEveryWait: a Job with ttlSecondsAfterFinished
// that is gone counts as complete in every wait for readiness, unless the
// wait saw it fail; one that still exists is judged as it is.
func TestSelfDeletingJobsUnderEveryWait(t *testing.T) {
	c := newWaitCluster(t, "self-deleting-jobs")
	waits := []struct {
		name     string
		strategy helmkube.WaitStrategy
		wait     func(helmkube.Waiter, helmkube.ResourceList, time.Duration) error
	}{
		{"Wait", helmkube.StatusWatcherStrategy, helmkube.Waiter.Wait},
		{"WaitWithJobs", helmkube.StatusWatcherStrategy, helmkube.Waiter.WaitWithJobs},
		{"WatchUntilReady (hooks)", helmkube.HookOnlyStrategy, helmkube.Waiter.WatchUntilReady},
	}
	running := func(t *testing.T, job string) { c.setJob(t, job, jobRunning) }
	// finishThenDelete finishes the Job as outcome, then deletes it as its
	// TTL has it deleted, a moment later.
	finishThenDelete := func(outcome jobOutcome) func(t *testing.T, job string) {
		return func(t *testing.T, job string) {
			c.setJob(t, job, outcome)
			time.Sleep(500 * time.Millisecond)
			c.deleteJob(t, job)
		}
	}
	tests := []struct {
		name string
		ttl  bool
		// before is done before the wait starts, during is done while it
		// runs, with the Deployment "held" not ready until after.
		before, during func(t *testing.T, job string)
		// wantErr is a substring of the error; empty means ready.
		wantErr string
		// jobsOnly: only WaitWithJobs and hooks judge a running Job.
		jobsOnly bool
		// appliedBy is who creates the objects: the client under test
		// (the default) or another one.
		appliedBy applier
	}{
		{
			name:   "gone before the wait, never seen",
			ttl:    true,
			before: finishThenDelete(jobComplete),
		},
		{
			// Under afterHooks the readiness wait starts after the post
			// hooks: a Job that failed meanwhile and deleted itself was
			// never seen by the wait, but the client that applied it
			// watched it from its apply on.
			name:    "failed and gone before the wait",
			ttl:     true,
			before:  finishThenDelete(jobFailed),
			wantErr: "status: 'Failed'",
		},
		{
			// Applied by someone else (an earlier run of the controller):
			// nothing here saw how it ended, so it cannot count as done.
			name:      "gone before the wait, applied elsewhere",
			ttl:       true,
			before:    finishThenDelete(jobComplete),
			wantErr:   "whether it succeeded is unknown",
			appliedBy: appliedElsewhere,
		},
		{
			name:   "seen complete, then gone",
			ttl:    true,
			before: running,
			during: finishThenDelete(jobComplete),
		},
		{
			name:    "seen failed, then gone",
			ttl:     true,
			before:  running,
			during:  finishThenDelete(jobFailed),
			wantErr: "status: 'Failed'",
		},
		{
			name:     "still running",
			ttl:      true,
			before:   running,
			wantErr:  "status: 'InProgress'",
			jobsOnly: true,
		},
		{
			name:    "failed and still there",
			ttl:     true,
			before:  func(t *testing.T, job string) { c.setJob(t, job, jobFailed) },
			wantErr: "status: 'Failed'",
		},
		{
			name:   "gone without ttlSecondsAfterFinished",
			ttl:    false,
			before: finishThenDelete(jobComplete),
			// As upstream words an object it reads as gone; Helm's
			// watch alone cannot tell gone from not read yet.
			wantErr: " status: 'NotFound']",
		},
	}
	n := 0
	for _, tc := range tests {
		for _, w := range waits {
			t.Run(tc.name+"/"+w.name, func(t *testing.T) {
				n++
				job, held := fmt.Sprintf("job-%d", n), fmt.Sprintf("held-%d", n)
				list := c.build(t, manifests(jobManifest(job, tc.ttl), deploymentManifest(held)))
				if tc.appliedBy == appliedElsewhere {
					c.createElsewhere(t, list)
				} else {
					c.create(t, list)
				}
				c.setDeploymentReady(t, held, tc.during == nil)
				tc.before(t, job)
				waiter, err := c.narrowed.GetWaiterWithOptions(w.strategy)
				if err != nil {
					t.Fatal(err)
				}
				timeout := 15 * time.Second
				if tc.wantErr != "" && tc.during == nil {
					timeout = 3 * time.Second
				}
				done := make(chan error, 1)
				go func() { done <- w.wait(waiter, list, timeout) }()
				if tc.during != nil {
					time.Sleep(time.Second)
					tc.during(t, job)
					time.Sleep(time.Second) // the Job is gone before the wait can end
					c.setDeploymentReady(t, held, true)
				}
				err = <-done
				wantErr := tc.wantErr
				if tc.jobsOnly && w.name == "Wait" {
					wantErr = "" // kstatus counts a started Job as current
				}
				switch {
				case wantErr == "" && err != nil:
					t.Errorf("%v, want ready", err)
				case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
					t.Errorf("%v, want an error with %q", err, wantErr)
				}
			})
		}
	}
}

// TestWaitForDeleteSeesSelfDeletingJobsGone: the wait for deletion gets no
// stand-in, so a deleted self-deleting Job is gone to it.
func TestWaitForDeleteSeesSelfDeletingJobsGone(t *testing.T) {
	c := newWaitCluster(t, "self-deleting-delete")
	list := c.build(t, jobManifest("gone", true))
	c.create(t, list)
	c.setJob(t, "gone", jobComplete)
	c.deleteJob(t, "gone")
	waiter, err := c.narrowed.GetWaiterWithOptions(helmkube.StatusWatcherStrategy)
	if err != nil {
		t.Fatal(err)
	}
	if err := waiter.WaitForDelete(list, 10*time.Second); err != nil {
		t.Errorf("wait for the deletion of a deleted Job: %v", err)
	}
}
