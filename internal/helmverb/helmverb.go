// Package helmverb names the Helm actions the controller runs: one
// vocabulary for the runner, the plan, internal/action, internal/afterhooks
// and the state machine, in errors, events, metrics, the afterHooks
// messages and status.sequence.action. It imports no package of the
// project, so the lowest layers can name an action without importing the
// plan.
package helmverb

import helmv2 "github.com/fluxcd/helm-controller/api/v2"

// Verb names a Helm action.
type Verb string

const (
	Install   Verb = "install"
	Upgrade   Verb = "upgrade"
	Rollback  Verb = "rollback"
	Uninstall Verb = "uninstall"
	Test      Verb = "test"
)

// EventAction is the Flux 2.10 event action of v (the action field of the
// events about a release); ActionReconcile for an unknown verb.
func (v Verb) EventAction() helmv2.Action {
	switch v {
	case Install:
		return helmv2.ActionHelmInstall
	case Upgrade:
		return helmv2.ActionHelmUpgrade
	case Rollback:
		return helmv2.ActionHelmRollback
	case Uninstall:
		return helmv2.ActionHelmUninstall
	case Test:
		return helmv2.ActionHelmTest
	}
	return helmv2.ActionReconcile
}
