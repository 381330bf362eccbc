package runner

import (
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// actionObserver is what the runner hears of one action, as
// internal/action tells it: the afterHooks phases, the batches of an
// ordered action, recreated objects and the hook cleanup of an uninstall.
type actionObserver struct {
	*afterHooksObserver
	sequence *sequenceObserver
	runner   *Runner
	verb     plan.Verb
}

var _ action.Observer = actionObserver{}

// observer is the observer of the action p plans.
func (r *Runner) observer(p plan.Plan) actionObserver {
	return actionObserver{
		afterHooksObserver: &afterHooksObserver{obj: r.obj, release: p.Release, recorder: r.recorder, progress: r.progress},
		sequence:           newSequenceObserver(r.obj, p.Verb, p.HookOrder, r.recorder, r.progress),
		runner:             r,
		verb:               p.Verb,
	}
}

func (o actionObserver) Sequence(p sequencing.Progress)       { o.sequence.observe(p) }
func (o actionObserver) SequenceWarning(msg string)           { o.sequence.warn(msg) }
func (o actionObserver) SequencePlanned(p sequencing.Planned) { o.sequence.planned(p) }

func (o actionObserver) Recreated(rc recreate.Recreated) {
	o.runner.recreated(o.verb.EventAction(), rc)
}

func (o actionObserver) HookResources(deleted, left []string) {
	if len(deleted) > 0 {
		o.runner.hookResourcesDeleted(deleted)
	}
	if len(left) > 0 {
		o.runner.hookResourcesLeft(left)
	}
}
