package preview

import (
	"context"
	"fmt"

	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Where the readiness wait of an action sits.
const (
	WaitBeforeHooks = "beforeHooks"
	WaitAfterHooks  = "afterHooks"
	WaitNone        = "none"
)

// Action is one Helm action of the step and what it would do.
type Action struct {
	Verb plan.Verb `json:"verb"`
	// Plan is the runner's plan of the action: the decisions the action
	// stack is built from.
	Plan    plan.Plan `json:"plan"`
	Objects Objects   `json:"objects"`
	// Hooks are the hooks the action runs, in order.
	Hooks []Hook `json:"hooks,omitempty"`
	// Wait is where the readiness wait sits: beforeHooks (before the post
	// hooks), afterHooks (after them) or none.
	Wait string `json:"wait"`
	// Sequence is the action's phases in order, in words.
	Sequence []string `json:"sequence"`
	// Order is the order of an ordered action (waitStrategy ordered, or
	// a revision applied in order).
	Order *sequencing.Plan `json:"order,omitempty"`
	// Recreates are the objects the API server refuses to change in
	// place, with what the action's recreate policy would do with each:
	// recreate it (and with whose consent) or fail with the refusal.
	Recreates []recreate.Verdict `json:"recreates,omitempty"`
	// HookLeftovers are what spec.uninstall.deleteHookResources would do
	// after an uninstall.
	HookLeftovers *Leftovers `json:"hookLeftovers,omitempty"`
	// RenderedWithoutServer are the kinds ("Kind.group") of the chart's
	// crds/ the cluster does not serve yet: an install applies those CRDs
	// first, the preview cannot, so it rendered the manifest without the
	// API server and did not compare objects of those kinds with it.
	RenderedWithoutServer []string `json:"renderedWithoutServer,omitempty"`
	// CRDs is what an install or upgrade does to the CRDs of the chart's
	// crds/ before Helm's action: created, updated, unchanged or left as
	// they are, under the action's CRD policy.
	CRDs *action.CRDPlan `json:"crds,omitempty"`
	// Warnings are what the plan sees coming: a readiness wait that
	// cannot end because the pods need what only a post hook may make.
	Warnings []string `json:"warnings,omitempty"`
}

// Leftovers are the objects hooks left, judged by the hook cleanup.
type Leftovers struct {
	Delete []string `json:"delete,omitempty"`
	// Leave are the objects it would not delete, with the reason.
	Leave []string `json:"leave,omitempty"`
}

// actionsOf are the Helm actions of the step next.
func actionsOf(ctx context.Context, in Input, next reconcile.Next, cur *releasev1.Release) ([]Action, error) {
	var out []Action
	for i, v := range next.Step.Verbs() {
		// An install after the uninstall of the same step finds the
		// cluster without the release's objects: the live comparison
		// would compare with what the uninstall deletes first.
		live := i == 0
		side, over := in, cur
		if v != plan.Uninstall && next.State == StateTargetChanged && in.Previous != nil {
			// The install at the new target, where nothing was released.
			over = nil
		}
		if v == plan.Uninstall && next.State == StateTargetChanged && in.Previous != nil {
			// The lookup reads where the new target is, which may not
			// be where the previous release lives.
			side.Helm, side.Lookup = in.Previous, nil
		}
		a, err := actionOf(ctx, side, v, over, live)
		if err != nil {
			return nil, fmt.Errorf("previewing the %s: %w", v, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// actionOf previews the action v over the release cur (nil: none),
// compared with the live objects when live is set.
func actionOf(ctx context.Context, in Input, v plan.Verb, cur *releasev1.Release, live bool) (Action, error) {
	p, err := in.Helm.Plan(v)
	if err != nil {
		return Action{}, err
	}
	a := Action{Verb: v, Plan: p}
	switch v {
	case plan.Install, plan.Upgrade:
		err = a.apply(ctx, in, v, cur, live)
	case plan.Rollback:
		err = a.rollback(ctx, in, cur)
	case plan.Uninstall:
		err = a.uninstall(ctx, in, cur, live)
	case plan.Test:
		a.Hooks = hooksOf(cur.Hooks, releasev1.HookTest)
	}
	if err != nil {
		return Action{}, err
	}
	a.Wait = waitPosition(p)
	a.Sequence = sequenceOf(a)
	return a, nil
}

// apply previews an install or upgrade: Helm's dry run of it, compared
// with what is stored (nothing for an install: a release installed again
// over an uninstalled one starts afresh).
func (a *Action) apply(ctx context.Context, in Input, v plan.Verb, cur *releasev1.Release, live bool) error {
	out, err := in.Helm.DryRun(ctx, v, in.Chart, in.Values)
	if err != nil {
		return err
	}
	rendered := out.Release
	a.RenderedWithoutServer = out.OfflineKinds
	if len(out.CRDs.Changes) > 0 {
		a.CRDs = &out.CRDs
	}
	from := ""
	if v == plan.Upgrade && cur != nil {
		from = cur.Manifest
	}
	if a.Objects, err = compareManifests(from, rendered.Manifest); err != nil {
		return err
	}
	if live {
		if err := a.compareLive(ctx, in, withoutKinds(rendered, out.OfflineKinds)); err != nil {
			return err
		}
		if err := a.Objects.passOverAbsent(ctx, in.Lookup, in.Object.GetReleaseNamespace()); err != nil {
			return err
		}
	}
	pre, post := phases(v)
	a.Hooks = append(hooksOf(rendered.Hooks, pre), hooksOf(rendered.Hooks, post)...)
	if a.Warnings, err = waitWarnings(ctx, in.Lookup, rendered, waitPosition(a.Plan), post, in.Object.GetReleaseNamespace()); err != nil {
		return err
	}
	a.Order, err = orderOf(a.Plan, in.Chart, rendered.Manifest)
	return err
}

// rollback previews the rollback to the revision the plan follows.
func (a *Action) rollback(ctx context.Context, in Input, cur *releasev1.Release) error {
	target, err := in.Helm.Revision(a.Plan.Revision.Version)
	if err != nil {
		return err
	}
	if a.Objects, err = compareManifests(cur.Manifest, target.Manifest); err != nil {
		return err
	}
	if err := a.compareLive(ctx, in, target); err != nil {
		return err
	}
	if err := a.Objects.passOverAbsent(ctx, in.Lookup, cur.Namespace); err != nil {
		return err
	}
	a.Hooks = append(hooksOf(target.Hooks, releasev1.HookPreRollback), hooksOf(target.Hooks, releasev1.HookPostRollback)...)
	a.Order, err = orderOf(a.Plan, nil, target.Manifest)
	return err
}

// uninstall previews the uninstall of cur: every object deleted but those
// that say keep or are not in the cluster (looked for when live is set),
// and the hook leftovers.
func (a *Action) uninstall(ctx context.Context, in Input, cur *releasev1.Release, live bool) error {
	var err error
	if a.Objects, err = compareManifests(cur.Manifest, ""); err != nil {
		return err
	}
	if live {
		if err := a.Objects.passOverAbsent(ctx, in.Lookup, cur.Namespace); err != nil {
			return err
		}
	}
	a.Hooks = append(hooksOf(cur.Hooks, releasev1.HookPreDelete), hooksOf(cur.Hooks, releasev1.HookPostDelete)...)
	if a.Order, err = orderOf(a.Plan, nil, cur.Manifest); err != nil {
		return err
	}
	if !in.Object.GetUninstall().DeleteHookResources {
		return nil
	}
	deleted, left, err := in.Helm.HookLeftovers()
	if err != nil {
		return fmt.Errorf("judging the hook leftovers: %w", err)
	}
	a.HookLeftovers = &Leftovers{Delete: deleted, Leave: left}
	return nil
}

// phases are the hook events before and after the objects of v.
func phases(v plan.Verb) (pre, post releasev1.HookEvent) {
	switch v {
	case plan.Install:
		return releasev1.HookPreInstall, releasev1.HookPostInstall
	case plan.Upgrade:
		return releasev1.HookPreUpgrade, releasev1.HookPostUpgrade
	case plan.Rollback:
		return releasev1.HookPreRollback, releasev1.HookPostRollback
	case plan.Uninstall:
		return releasev1.HookPreDelete, releasev1.HookPostDelete
	}
	return releasev1.HookTest, ""
}

// waitPosition is where p waits for readiness.
func waitPosition(p plan.Plan) string {
	switch {
	case p.Verb == plan.Test:
		return WaitNone
	case p.AfterHooks():
		return WaitAfterHooks
	case p.Wait.Helm == kube.HookOnlyStrategy:
		return WaitNone
	}
	return WaitBeforeHooks
}
