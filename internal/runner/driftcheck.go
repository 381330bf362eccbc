package runner

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/afterhooks/helm-controller/internal/drift"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// DetectDrift compares the release's objects with the cluster the Helm
// configuration deploys to.
func (r *Runner) DetectDrift(ctx context.Context, rel *releasev1.Release) (jsondiff.DiffSet, error) {
	checker, err := r.driftChecker()
	if err != nil {
		return nil, err
	}
	set, err := checker.Detect(ctx, rel)
	// Events and conditions only name the drifted objects; the changes
	// themselves (Secret values masked) are for the debug log.
	log := ctrl.LoggerFrom(ctx).V(logger.DebugLevel)
	for _, d := range drift.Drifted(set) {
		log.Info("drift detected", "object", fmt.Sprintf("%s/%s/%s", d.GroupVersionKind().Kind, d.GetNamespace(), d.GetName()),
			"type", d.Type, "patch", d.Patch)
	}
	return set, err
}

// DetectRefused compares rel's objects with the cluster as DetectDrift
// does, and also returns the objects the API server refuses to change in
// place, for a plan to judge with the action's recreate policy.
// A plan only reads: its checker takes no fields over (which writes
// managedFields), whatever the drift detection mode.
func (r *Runner) DetectRefused(ctx context.Context, rel *releasev1.Release) (jsondiff.DiffSet, []recreate.Refused, error) {
	if r.cfg.RESTClientGetter == nil {
		return nil, nil, fmt.Errorf("the Helm configuration has no REST client getter")
	}
	opts := r.driftOptions()
	opts.OverrideManagers = nil
	checker, err := drift.NewChecker(r.cfg.RESTClientGetter, opts)
	if err != nil {
		return nil, nil, err
	}
	return checker.DetectRefused(ctx, rel)
}

// CorrectDrift applies the drifted objects of set again.
func (r *Runner) CorrectDrift(ctx context.Context, set jsondiff.DiffSet) (*ssa.ChangeSet, error) {
	checker, err := r.driftChecker()
	if err != nil {
		return nil, err
	}
	return checker.Correct(ctx, set)
}

// driftChecker builds (once per runner) the drift checker from the Helm
// configuration's REST client getter: whatever cluster and identity Helm
// deploys with (a remote kubeconfig, an impersonated ServiceAccount) is the
// one drift is detected and corrected with.
func (r *Runner) driftChecker() (*drift.Checker, error) {
	if r.drift != nil {
		return r.drift, nil
	}
	if r.cfg.RESTClientGetter == nil {
		return nil, fmt.Errorf("the Helm configuration has no REST client getter")
	}
	checker, err := drift.NewChecker(r.cfg.RESTClientGetter, r.driftOptions())
	if err != nil {
		return nil, err
	}
	r.drift = checker
	return checker, nil
}

// driftOptions are the drift checker's options. A correction recreates
// what an upgrade would, with the release's one recreate policy: annotated
// objects, or the kinds the RecreateImmutableResources gate covers; its
// memory keeps them, so an object refused again is not recreated again
// and again.
func (r *Runner) driftOptions() drift.Options {
	opts := drift.Options{FieldManager: r.fieldManager, Ignore: r.driftIgnore,
		Recreate:        *r.settings.Recreate,
		RecreateTimeout: r.planFor(plan.Upgrade).Wait.Timeout,
		Dependents:      recreate.NewDependents(r.cfg.RESTClientGetter),
		OnRecreate:      func(rc recreate.Recreated) { r.recreated(helmv2.ActionDriftDetection, rc) },
	}
	// Taking fields over writes managedFields; warn mode must only report.
	if r.obj.GetDriftDetection().GetMode() == helmv2.DriftDetectionEnabled {
		opts.OverrideManagers = r.overrideManagers
	}
	return opts
}
