package runner

import (
	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// The verbs the runner names Helm actions by, in events, metrics and the
// status plan of an ordered action.
const (
	verbInstall   = "install"
	verbUpgrade   = "upgrade"
	verbRollback  = "rollback"
	verbUninstall = "uninstall"
	verbTest      = "test"
	// verbResume is the readiness wait of an afterHooks revision that an
	// earlier run left pending.
	verbResume = "resume"
)

// plan is what the runner decides about one Helm action before it runs.
// The hook wait strategy is decided here and nowhere else: the observers
// (events, the Reconciling condition, the phase metric) and the action
// layer (action.Options.WaitStrategy, which picks the afterHooks run) are
// handed the same value.
type plan struct {
	verb string
	// waitStrategy is afterHooks or beforeHooks for install, upgrade and
	// rollback; empty for the others, which have no post hooks to order
	// the wait around.
	waitStrategy v2.HookWaitStrategy
}

// planFor decides the action verb of obj: its own waitStrategy, else
// defaultWait (--default-wait-strategy, DefaultToAfterHooks), and
// beforeHooks whenever the action's wait is disabled, since there is then
// no wait to move after the hooks.
func planFor(obj *v2.HelmRelease, verb string, defaultWait v2.HookWaitStrategy) plan {
	p := plan{verb: verb}
	switch verb {
	case verbInstall:
		p.waitStrategy = obj.GetInstall().GetWaitStrategy(defaultWait)
	case verbUpgrade:
		p.waitStrategy = obj.GetUpgrade().GetWaitStrategy(defaultWait)
	case verbRollback:
		p.waitStrategy = obj.GetRollback().GetWaitStrategy(defaultWait)
	}
	return p
}
