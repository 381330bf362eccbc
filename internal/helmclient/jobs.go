package helmclient

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
)

// Jobs whose manifest sets spec.ttlSecondsAfterFinished are deleted by
// Kubernetes' TTL controller once they finish, often before a wait has
// seen them finish, or before it even starts (afterHooks' readiness wait
// runs after the hooks). Helm's status watcher then sees the Job
// NotFound, or never sees it, and waits until its timeout. Upstream
// helm-controller counts such a Job as done when it is gone; so does this
// package, without changing Helm's waiter: a narrowed list or watch hands
// the waiter, for a self-deleting Job that is gone, a stand-in that Helm's
// own status readers judge:
//
//   - the Job's last state, when the wait saw it Failed (the release
//     still fails: a Job that failed and was removed is a failure);
//   - otherwise a Job with a Complete condition (done), whether the wait
//     saw it complete, running, or never at all.
//
// A self-deleting Job that still exists is judged as it is: running is
// waited for, Failed fails the wait. Only waits for readiness get
// stand-ins; a wait for deletion sees the Job gone, as it is.

// Reason and message of the Complete condition of a stand-in.
const (
	standInReason  = "DeletedAfterFinishing"
	standInMessage = "the Job is gone: spec.ttlSecondsAfterFinished deletes it once it has finished; " +
		"counted as complete since this wait did not see it fail"
)

// selfDeletingJobs are the Jobs of one wait whose manifest sets
// spec.ttlSecondsAfterFinished, with the last state of each that the
// wait's list or watch delivered.
type selfDeletingJobs struct {
	// manifests holds each Job's manifest, by resource, namespace and name.
	manifests map[resourceNamespace]map[string]*unstructured.Unstructured

	mu   sync.Mutex
	last map[resourceNamespace]map[string]*unstructured.Unstructured
}

func newSelfDeletingJobs() *selfDeletingJobs {
	return &selfDeletingJobs{
		manifests: map[resourceNamespace]map[string]*unstructured.Unstructured{},
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
func (j *selfDeletingJobs) standIn(key resourceNamespace, name, resourceVersion string) *unstructured.Unstructured {
	j.mu.Lock()
	last := j.last[key][name]
	j.mu.Unlock()
	return goneJob(j.manifests[key][name], last, resourceVersion)
}

// goneJob decides what a self-deleting Job that is gone counts as: its
// last seen state when that is Failed, otherwise complete. manifest is
// the Job as the chart renders it; last is the last state the wait saw,
// nil when it never saw the Job.
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
	if last != nil && (jobCondition(last, batchv1.JobFailed) || jobCondition(last, batchv1.JobComplete)) {
		return out // as it finished
	}
	complete := map[string]any{
		"type":    string(batchv1.JobComplete),
		"status":  string(corev1.ConditionTrue),
		"reason":  standInReason,
		"message": standInMessage,
	}
	_ = unstructured.SetNestedSlice(out.Object, []any{complete}, "status", "conditions")
	return out
}

// jobCondition reports whether the Job u has condition t with status True.
func jobCondition(u *unstructured.Unstructured, t batchv1.JobConditionType) bool {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if ok && m["type"] == string(t) && m["status"] == string(corev1.ConditionTrue) {
			return true
		}
	}
	return false
}
