package runner

import (
	"fmt"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// planFor is the plan of the action v of r's HelmRelease (see
// internal/plan): every decision the action stack and the observers act
// on, made here once per action. Install and upgrade add the post
// renderer (see call).
func (r *Runner) planFor(v plan.Verb) plan.Plan {
	p := plan.New(r.obj, v, r.settings)
	p.WaitContext = r.newRevisionContext()
	p.StatusReaders = r.statusReaders
	return p
}

// upgradePlan is the plan of an upgrade: Helm's upgrade resolves
// serverSideApply auto from the release's newest revision, read here, as
// Helm will read it, right before the action, so that the action
// executes that decision instead of reading storage itself. Unreadable or
// absent: no revision to start from, as Helm's own read would find (its
// upgrade then fails on its own).
func (r *Runner) upgradePlan() plan.Plan {
	p := r.planFor(plan.Upgrade)
	last, err := action.LastRelease(r.cfg, r.releaseName())
	if err != nil {
		last = nil
	}
	return p.Upgrading(last)
}

// rollbackPlan is the plan of a rollback to toVersion: it follows the
// revision rolled back to, read here once. A rollback that starts after a
// new revision was seen (a remediation of the action that new revision
// abandoned) is not bound to the already cancelled wait context: it would
// fail at once and leave the release without its remediation.
func (r *Runner) rollbackPlan(toVersion int) (plan.Plan, error) {
	p := r.planFor(plan.Rollback)
	if r.newRevisionTrigger() != "" {
		p.WaitContext = nil
	}
	// Unreadable: Helm's rollback says why.
	target, err := action.RollbackTarget(r.cfg, r.releaseName(), toVersion)
	if err != nil {
		target = nil
	}
	if p, err = p.Follow(target); err != nil {
		return p, fmt.Errorf("%s: %w", p.Verb, err)
	}
	// What the revision rolled back from consented to recreate, the
	// rollback may recreate back (docs/immutable.md).
	if from, err := action.LastRelease(r.cfg, r.releaseName()); err == nil {
		p.RolledBackFrom = recreate.ConsentsOf(from.Manifest)
	}
	return p, nil
}

// uninstallPlan is the plan of the uninstall: it follows the newest
// revision, deleted in reverse order when it was applied in order.
func (r *Runner) uninstallPlan() (plan.Plan, error) {
	p := r.planFor(plan.Uninstall)
	last, err := action.LastRelease(r.cfg, r.releaseName())
	if err != nil {
		last = nil
	}
	if p, err = p.Follow(last); err != nil {
		return p, fmt.Errorf("%s: %w", p.Verb, err)
	}
	return p, nil
}

// resumePlan is the plan of the action that left rel pending: its verb
// is read from rel's status.
func (r *Runner) resumePlan(rel *releasev1.Release) plan.Plan {
	v := plan.Install
	if rel != nil && rel.Info != nil {
		switch rel.Info.Status {
		case common.StatusPendingUpgrade:
			v = plan.Upgrade
		case common.StatusPendingRollback:
			v = plan.Rollback
		}
	}
	p := r.planFor(v)
	p.Resumed = true
	return p
}

// call hands p to internal/action with the controller's settings and the
// observer of p's action.
func (r *Runner) call(p plan.Plan) action.Call {
	return action.Call{Config: r.config, Plan: p, Observer: r.observer(p)}
}
