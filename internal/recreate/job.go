package recreate

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var jobKind = schema.GroupKind{Group: "batch", Kind: "Job"}

// unfinishedJob: deleting a Job deletes its pods, so a recreate would stop
// a Job halfway (a migration, a backup) and start it again from the top.
// A Job that still has active pods, or that the Job controller has not
// yet marked Complete or Failed (running, pending, suspended), is left
// alone; the next attempt recreates it once it has finished. Consent does
// not lift this: upstream fails such an upgrade and the Job runs on.
func unfinishedJob(r Refused, live *unstructured.Unstructured) string {
	if r.Kind != jobKind {
		return ""
	}
	active, _, _ := unstructured.NestedInt64(live.Object, "status", "active")
	finished := jobFinished(live)
	switch {
	case active > 0:
		return fmt.Sprintf("it is a Job that is still running (%d active pods): recreating it would stop it halfway; "+
			"it is recreated on the next attempt after it has finished", active)
	case !finished:
		return "it is a Job that has not finished (neither Complete nor Failed): recreating it would stop it halfway; " +
			"it is recreated on the next attempt after it has finished"
	}
	return ""
}

// jobFinished tells whether the Job controller marked live Complete or
// Failed.
func jobFinished(live *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
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
