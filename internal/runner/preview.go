package runner

import (
	"context"
	"fmt"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// Plan is the plan the runner would hand internal/action for the action v,
// made by the functions the action itself uses (planFor, upgradePlan,
// rollbackPlan, uninstallPlan): a preview of the next reconcile prints it. A rollback
// is planned to the previous revision, as a remediation does.
func (r *Runner) Plan(v plan.Verb) (plan.Plan, error) {
	switch v {
	case plan.Rollback:
		return r.rollbackPlan(0)
	case plan.Uninstall:
		return r.uninstallPlan()
	case plan.Upgrade:
		return r.upgradePlan(), nil
	}
	return r.planFor(v), nil
}

// DryRun renders the install or upgrade v of chart with values as the
// action would (the same HelmRelease, plan and post renderer), through
// Helm's server-side dry run: only reads and dry-run requests reach the
// cluster, and Helm storage is only read.
func (r *Runner) DryRun(ctx context.Context, v plan.Verb, chart *chartv2.Chart, values map[string]any) (action.Rendered, error) {
	obj, planned := r.obj, r.planFor
	switch v {
	case plan.Install:
		obj = r.installObject(ctx)
	case plan.Upgrade:
		planned = func(plan.Verb) plan.Plan { return r.upgradePlan() }
	default:
		return action.Rendered{}, fmt.Errorf("a dry run renders an install or an upgrade, not %s", v)
	}
	p, err := r.withPostRenderer(planned(v))
	if err != nil {
		return action.Rendered{}, err
	}
	return action.DryRun(ctx, r.cfg, obj, chart, values, action.Call{Config: r.config, Plan: p})
}

// HookLeftovers are the objects the release's hooks left that an
// uninstall would delete, and those it would leave with the reason
// (spec.uninstall.deleteHookResources), judged now; see
// action.HookLeftovers.
func (r *Runner) HookLeftovers() (deleted, left []string, err error) {
	return action.HookLeftovers(r.cfg, r.obj)
}

// Revision returns the stored revision version of the release, for the
// manifest a rollback would restore.
func (r *Runner) Revision(version int) (*releasev1.Release, error) {
	rels, err := action.History(r.cfg, r.releaseName())
	if err != nil {
		return nil, err
	}
	for _, rel := range rels {
		if rel.Version == version {
			return rel, nil
		}
	}
	return nil, fmt.Errorf("release %s has no revision %d in storage", r.releaseName(), version)
}
