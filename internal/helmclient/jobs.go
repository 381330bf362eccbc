package helmclient

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/kubewait"
	"github.com/afterhooks/helm-controller/internal/runstate"
)

// Jobs whose manifest sets spec.ttlSecondsAfterFinished are deleted by
// Kubernetes' TTL controller once they finish, often before a wait has
// seen them finish, or before it even starts (afterHooks' readiness wait
// runs after the post hooks). Helm's status watcher then sees the Job
// NotFound, or never sees it, and waits until its timeout. Upstream
// helm-controller counts such a Job as done once it is gone, whether it
// failed or not. Here a gone Job counts as it ended: the client that
// applied it watched it from its apply on (Client.Jobs, a jobttl.Tracker),
// and a narrowed list or watch hands Helm's unchanged waiter, for a
// self-deleting Job that is gone, a stand-in that Helm's own status
// readers judge:
//
//   - the Job's last state, when the wait itself saw it finish;
//   - otherwise the last state the tracker saw, when it saw it finish
//     (Complete or Failed, with the whole status, so that a
//     healthCheckExprs rule on status.succeeded reads what it would have
//     read on the Job);
//   - otherwise a Job with a Failed condition saying that its outcome is
//     unknown: nothing in this process saw it finish (it was applied by
//     an earlier run of the controller, or its watch was lost), and a Job
//     that may have failed never counts as done.
//
// A self-deleting Job that still exists is judged as it is: running is
// waited for, Failed fails the wait. Only waits for readiness get
// stand-ins; a wait for deletion sees the Job gone, as it is.

// Reason and message of the Failed condition of a stand-in for a Job whose
// outcome nothing saw.
const (
	unknownReason  = "OutcomeUnknown"
	unknownMessage = "the Job deleted itself (spec.ttlSecondsAfterFinished) before the controller saw it finish; " +
		"whether it succeeded is unknown, so it does not count as done"
)

// trackerPatience bounds how long a stand-in waits for the tracker to
// deliver the last changes of a Job the wait found gone.
const trackerPatience = 10 * time.Second

// selfDeletingJobs are the Jobs of one wait whose manifest sets
// spec.ttlSecondsAfterFinished, with the last state of each that the
// wait's list or watch delivered.
type selfDeletingJobs struct {
	// manifests holds each Job's manifest, by resource, namespace and name.
	manifests map[resourceNamespace]map[string]*unstructured.Unstructured
	// tracked knows how the Jobs the client applied ended; may be nil.
	tracked *jobttl.Tracker

	mu   sync.Mutex
	last map[resourceNamespace]map[string]*unstructured.Unstructured
	// unknown names the Jobs that got a stand-in of unknown outcome.
	unknown []string
}

func newSelfDeletingJobs(tracked *jobttl.Tracker) *selfDeletingJobs {
	return &selfDeletingJobs{
		manifests: map[resourceNamespace]map[string]*unstructured.Unstructured{},
		tracked:   tracked,
		last:      map[resourceNamespace]map[string]*unstructured.Unstructured{},
	}
}

// add remembers info's object, of the resource and namespace in key,
// when it is a Job that deletes itself.
func (j *selfDeletingJobs) add(key resourceNamespace, info *resource.Info) {
	u, ok := jobttl.Manifest(info)
	if !ok {
		return
	}
	if j.manifests[key] == nil {
		j.manifests[key] = map[string]*unstructured.Unstructured{}
	}
	j.manifests[key][u.GetName()] = u
}

func (j *selfDeletingJobs) covers(key resourceNamespace, name string) bool {
	return j != nil && j.manifests[key][name] != nil
}

// saw records obj as the last state of a self-deleting Job.
func (j *selfDeletingJobs) saw(key resourceNamespace, obj runtime.Object) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !j.covers(key, u.GetName()) {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.last[key] == nil {
		j.last[key] = map[string]*unstructured.Unstructured{}
	}
	j.last[key][u.GetName()] = u
}

// standIn is what the wait sees, at resourceVersion, for the
// self-deleting Job name that is gone.
func (j *selfDeletingJobs) standIn(ctx context.Context, key resourceNamespace, name, resourceVersion string) *unstructured.Unstructured {
	j.mu.Lock()
	last := j.last[key][name]
	j.mu.Unlock()
	if !finished(last) {
		ctx, cancel := context.WithTimeout(ctx, trackerPatience)
		tracked, outcome := j.tracked.Last(ctx, key.namespace, name)
		cancel()
		if outcome == jobttl.Complete || outcome == jobttl.Failed {
			last = tracked
		}
	}
	if !finished(last) {
		j.noteUnknown(key.namespace + "/" + name)
	}
	return goneJob(j.manifests[key][name], last, resourceVersion)
}

func (j *selfDeletingJobs) noteUnknown(job string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !slices.Contains(j.unknown, job) {
		j.unknown = append(j.unknown, job)
	}
}

// explain adds to a failed wait's error, worded as upstream words it
// (kubewait.FromHelm), why the Jobs of unknown outcome failed it: kstatus
// only says "Job Failed" of their stand-ins.
func (j *selfDeletingJobs) explain(err error) error {
	if err == nil || j == nil {
		return err
	}
	j.mu.Lock()
	unknown := slices.Clone(j.unknown)
	j.mu.Unlock()
	if len(unknown) == 0 {
		return err
	}
	note := fmt.Sprintf("Job %s: %s", strings.Join(unknown, ", Job "), unknownMessage)
	if noted := kubewait.AddNote(kubewait.FromHelm(err), note); noted != nil {
		return noted
	}
	return fmt.Errorf("%w; %s", err, note)
}

func finished(job *unstructured.Unstructured) bool {
	return job != nil && runstate.JobFinished(job.Object)
}

// goneJob decides what a self-deleting Job that is gone counts as: its
// last known state when that shows it finished, otherwise failed with an
// unknown outcome. manifest is the Job as the chart renders it; last is
// the last state the wait or the tracker saw, nil when neither saw it.
func goneJob(manifest, last *unstructured.Unstructured, resourceVersion string) *unstructured.Unstructured {
	base := last
	if base == nil {
		base = manifest
	}
	out := base.DeepCopy()
	// A Job being deleted (foreground, as the TTL controller deletes) is
	// Terminating to kstatus: the stand-in is the Job as it finished.
	out.SetDeletionTimestamp(nil)
	out.SetDeletionGracePeriodSeconds(nil)
	out.SetFinalizers(nil)
	out.SetManagedFields(nil)
	if resourceVersion != "" {
		out.SetResourceVersion(resourceVersion)
	}
	if finished(last) {
		return out // as it finished
	}
	failed := map[string]any{
		"type":    string(batchv1.JobFailed),
		"status":  string(corev1.ConditionTrue),
		"reason":  unknownReason,
		"message": unknownMessage,
	}
	_ = unstructured.SetNestedSlice(out.Object, []any{failed}, "status", "conditions")
	return out
}
