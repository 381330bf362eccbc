package recreate

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/afterhooks/helm-controller/internal/runstate"
)

var jobKind = runstate.JobKind

// unfinishedJob: deleting a Job deletes its pods, so a recreate would stop
// a Job halfway (a migration, a backup) and start it again from the top.
// A Job that still has active pods, or that the Job controller has not
// yet marked Complete or Failed (running, pending, suspended), is left
// alone; the next attempt recreates it once it has finished. Consent does
// not lift this: upstream fails such an upgrade and the Job runs on. What
// "finished" means is internal/runstate's rule, which the hook cleanup
// follows too.
func unfinishedJob(r Refused, live *unstructured.Unstructured) string {
	if r.Kind != jobKind {
		return ""
	}
	state := runstate.Unfinished(r.Kind, live.Object)
	if state == "" {
		return ""
	}
	return "it is " + state + ": recreating it would stop it halfway; it is recreated on the next attempt after it has finished"
}
