package preview

import (
	"fmt"

	"github.com/afterhooks/helm-controller/internal/plan"
)

// sequenceOf is a's phases in the order the action runs them: hooks
// before, the objects (in batches when ordered), the readiness wait and
// the hooks after, in the order the plan puts them.
func sequenceOf(a Action) []string {
	if a.Verb == plan.Test {
		return []string{fmt.Sprintf("run %d test hooks", len(a.Hooks))}
	}
	pre, post := phases(a.Verb)
	out := []string{hookLine(a, string(pre)), objectsLine(a)}
	wait := waitLine(a)
	if a.Wait == WaitBeforeHooks {
		out = append(out, wait)
	}
	out = append(out, hookLine(a, string(post)))
	if a.Wait != WaitBeforeHooks {
		out = append(out, wait)
	}
	if a.HookLeftovers != nil {
		out = append(out, fmt.Sprintf("delete %d objects the hooks left (deleteHookResources), leave %d",
			len(a.HookLeftovers.Delete), len(a.HookLeftovers.Leave)))
	}
	return out
}

func hookLine(a Action, phase string) string {
	n := 0
	for _, h := range a.Hooks {
		if h.Phase == phase {
			n++
		}
	}
	return fmt.Sprintf("run %d %s hooks", n, phase)
}

func objectsLine(a Action) string {
	o := a.Objects
	line := fmt.Sprintf("apply: create %d, update %d, delete %d, keep %d", len(o.Create), len(o.Update), len(o.Delete), len(o.Keep))
	if a.Verb == plan.Uninstall {
		line = fmt.Sprintf("delete %d objects, keep %d", len(o.Delete), len(o.Keep))
	}
	if a.Order != nil {
		line += fmt.Sprintf(", in %d batches (ordered, from the %s)", len(a.Order.Batches), a.Plan.Ordering.From)
	}
	return line
}

func waitLine(a Action) string {
	w := a.Plan.Wait
	switch {
	case a.Wait == WaitNone:
		return "no readiness wait"
	case a.Verb == plan.Uninstall:
		return fmt.Sprintf("wait for the deletions (%s, timeout %s)", w.Helm, w.Timeout)
	case a.Wait == WaitAfterHooks:
		return fmt.Sprintf("wait for readiness (afterHooks, %s, jobs: %t, timeout %s)", w.Readiness, w.WaitForJobs, w.Timeout)
	}
	return fmt.Sprintf("wait for readiness (beforeHooks, %s, jobs: %t, timeout %s)", w.Helm, w.WaitForJobs, w.Timeout)
}
