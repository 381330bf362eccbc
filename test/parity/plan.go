package parity

import (
	"fmt"
	"slices"
	"strings"
)

// Prediction is what a plan (`helm-controller plan`, taken right before a
// step) says the step will do, in the names an Observation uses ("Kind
// namespace/name", the namespace written <ns>).
type Prediction struct {
	// Verb is the first Helm action of the plan; empty when the plan says
	// the step changes nothing.
	Verb string
	// Create, Delete and Keep are the release's objects the action
	// creates, deletes, or stops managing and leaves (resource-policy
	// keep).
	Create, Delete, Keep []string
	// Recreate are the objects the API server refuses to change in place
	// and the action deletes and makes again.
	Recreate []string
	// Refused are the objects the API server refuses to change in place
	// and the action does not recreate: the action fails on them.
	Refused []string
	// Hooks are the hooks the action runs, "phase Kind/name", in order.
	Hooks []string
	// SelfDeleting are the objects of either manifest that delete
	// themselves once finished (Jobs with ttlSecondsAfterFinished): one
	// may be gone before the step is observed, so neither its creation
	// nor its deletion can be seen.
	SelfDeleting []string
}

// Summary is the prediction in one line, for a log.
func (p Prediction) Summary() string {
	if p.Verb == "" {
		return "nothing"
	}
	return fmt.Sprintf("%s: create %d, delete %d, keep %d, recreate %d, refused %d, hooks [%s]", p.Verb,
		len(p.Create), len(p.Delete), len(p.Keep), len(p.Recreate), len(p.Refused), strings.Join(p.Hooks, ", "))
}

// ComparePlan lists where what the controller did in a step (seen as
// before → after) differs from the prediction taken right before it.
// Whether the action succeeds is the one thing a plan cannot know (a
// hook may fail, a pod may never be ready), so the objects and hooks
// are compared only for an action that succeeded; a plan that says the
// action fails on a refused object is compared either way.
func ComparePlan(p Prediction, before, after Observation) []string {
	if p.Verb == "" {
		return compareNothingPlanned(before, after)
	}
	var diffs []string
	if after.LastAction != p.Verb {
		diffs = append(diffs, fmt.Sprintf("action: the plan said %s, the controller ran %s", p.Verb, orDash(after.LastAction)))
	}
	succeeded := strings.HasPrefix(after.Conditions["Released"], "True/")
	if !succeeded {
		return diffs
	}
	if len(p.Refused) > 0 {
		diffs = append(diffs, fmt.Sprintf("the plan said %s fails on %s, which it would not recreate; it succeeded",
			p.Verb, strings.Join(p.Refused, ", ")))
	}
	if latestRevision(after.Storage) <= latestRevision(before.Storage) {
		diffs = append(diffs, fmt.Sprintf("revisions: the plan said %s, Helm storage has no new revision (%s)",
			p.Verb, strings.Join(after.Storage, "; ")))
	}
	created, removed := setDifference(after.Objects, before.Objects), setDifference(before.Objects, after.Objects)
	unseen := p.SelfDeleting
	diffs = appendSetDiff(diffs, "created", setDifference(p.Create, unseen), setDifference(created, unseen))
	diffs = appendSetDiff(diffs, "deleted or kept", setDifference(union(p.Delete, p.Keep), unseen), setDifference(removed, unseen))
	diffs = appendSetDiff(diffs, "recreated", p.Recreate, objectsOnly(after.Recreated))
	if planned := lastRuns(p.Hooks); !slices.Equal(planned, after.HooksRun) {
		diffs = append(diffs, fmt.Sprintf("hooks in order: the plan said [%s], the controller ran [%s]",
			strings.Join(planned, ", "), strings.Join(after.HooksRun, ", ")))
	}
	return diffs
}

// lastRuns keeps, of hook runs ("phase Kind/name") in order, the last run
// of each hook: Helm records only a hook's last run, so a hook of both
// phases (pre-install and post-install) is seen once, in its post run.
func lastRuns(runs []string) []string {
	hook := func(run string) string { return run[strings.Index(run, " ")+1:] }
	var out []string
	for i, run := range runs {
		later := slices.ContainsFunc(runs[i+1:], func(r string) bool { return hook(r) == hook(run) })
		if !later {
			out = append(out, run)
		}
	}
	return out
}

// latestRevision is the number of the newest of storage's entries ("v3
// deployed"), 0 for none. Their count tells nothing: Helm prunes storage
// to spec.maxHistory entries (5 by default) as it adds one.
func latestRevision(storage []string) int {
	latest := 0
	for _, entry := range storage {
		var v int
		if _, err := fmt.Sscanf(entry, "v%d", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest
}

// compareNothingPlanned: a plan without an action means no revision, no
// object made, removed or made again.
func compareNothingPlanned(before, after Observation) []string {
	var diffs []string
	if !slices.Equal(before.Storage, after.Storage) {
		diffs = append(diffs, fmt.Sprintf("revisions: the plan said nothing changes, Helm storage went from [%s] to [%s]",
			strings.Join(before.Storage, "; "), strings.Join(after.Storage, "; ")))
	}
	diffs = appendSetDiff(diffs, "created", nil, setDifference(after.Objects, before.Objects))
	diffs = appendSetDiff(diffs, "deleted or kept", nil, setDifference(before.Objects, after.Objects))
	return appendSetDiff(diffs, "recreated", nil, objectsOnly(after.Recreated))
}

// appendSetDiff adds a line when the planned and done sets differ, naming
// what only one of them has.
func appendSetDiff(diffs []string, what string, planned, done []string) []string {
	onlyPlanned, onlyDone := setDifference(planned, done), setDifference(done, planned)
	if len(onlyPlanned) == 0 && len(onlyDone) == 0 {
		return diffs
	}
	return append(diffs, fmt.Sprintf("%s: only in the plan [%s], only done [%s]",
		what, strings.Join(onlyPlanned, ", "), strings.Join(onlyDone, ", ")))
}

// setDifference is a minus b, sorted, each once.
func setDifference(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func union(a, b []string) []string { return append(slices.Clone(a), b...) }

// objectsOnly drops the hooks from a Recreated list: a hook is made
// again whenever it runs, which the plan's hooks already say.
func objectsOnly(recreated []string) []string {
	var out []string
	for _, name := range recreated {
		if !strings.HasPrefix(name, HookPrefix) {
			out = append(out, name)
		}
	}
	return out
}

// HookPrefix starts the names of hook objects in Observation.Recreated.
const HookPrefix = "hook "
