// Package runstate tells whether a Job or a Pod has finished its run. It
// is the one rule for every deletion the controller makes of an object it
// did not just create: the recreate of an immutable Job
// (internal/recreate) and the cleanup of the objects hooks left
// (internal/hookcleanup) both leave an unfinished one alone, because
// deleting a Job deletes its pods and deleting a Pod stops its containers,
// so either would stop the work halfway (a migration, a backup).
package runstate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// JobKind is the group and kind of a Kubernetes Job.
	JobKind = schema.GroupKind{Group: "batch", Kind: "Job"}
	// PodKind is the group and kind of a Kubernetes Pod.
	PodKind = schema.GroupKind{Kind: "Pod"}
)

// Unfinished returns, for obj (an object of kind gk, as unstructured
// content) that is a Job or a Pod whose run has not finished, what state it
// is in, in words that follow "it is" ("a Job that is still running (2
// active pods)"); "" for one that has finished and for any other kind.
//
// A Job has finished once the Job controller marked it Complete or Failed
// and none of its pods is active any more: status.active counts pods that
// still run, also those of a Job just marked Failed that are still being
// stopped. A Job that has no such condition (pending, running, suspended,
// or only SuccessCriteriaMet or FailureTarget while its pods finish) has
// not finished. A Pod has finished once its phase is Succeeded or Failed.
func Unfinished(gk schema.GroupKind, obj map[string]any) string {
	switch gk {
	case JobKind:
		return unfinishedJob(obj)
	case PodKind:
		return unfinishedPod(obj)
	}
	return ""
}

func unfinishedJob(obj map[string]any) string {
	active, _, _ := unstructured.NestedInt64(obj, "status", "active")
	switch {
	case active > 0:
		return fmt.Sprintf("a Job that is still running (%d active pods)", active)
	case !JobFinished(obj):
		return "a Job that has not finished (neither Complete nor Failed)"
	}
	return ""
}

// JobFinished tells whether the Job controller marked obj Complete or
// Failed (its pods may still be stopping: see Unfinished).
func JobFinished(obj map[string]any) bool {
	conditions, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok || cond["status"] != "True" {
			continue
		}
		if cond["type"] == "Complete" || cond["type"] == "Failed" {
			return true
		}
	}
	return false
}

func unfinishedPod(obj map[string]any) string {
	phase, _, _ := unstructured.NestedString(obj, "status", "phase")
	switch phase {
	case "Succeeded", "Failed":
		return ""
	case "":
		return "a Pod that has not finished (no phase yet)"
	}
	return fmt.Sprintf("a Pod that has not finished (phase %s)", phase)
}
