package action

import (
	"context"
	"errors"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Rollback rolls the release of obj back to revision toVersion; 0 means the
// revision before the last one, as in Helm. The plan follows the revision
// rolled back to (its apply method, its order: see plan.Plan.Follow), as
// the runner read it. Helm's rollback cannot be cancelled, only the plan's
// WaitContext bounds its wait; under afterHooks ctx ending interrupts the
// readiness wait, which leaves the revision pending.
//
// spec.rollback.recreate has no Helm 4 equivalent (Helm removed pod
// recreation); it is ignored with a warning in Helm's log, as upstream does.
func Rollback(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, toVersion int, c Call) error {
	if obj == nil {
		return errNilObject
	}
	if toVersion < 0 {
		return errors.New("rollback: negative target revision")
	}
	_, err := stacked(ctx, cfg, obj, c, nil, func(cfg *helmaction.Configuration, _ *chartv2.Chart, _ postrenderer.PostRenderer) (*releasev1.Release, error) {
		return nil, rollback(cfg, obj, toVersion, c)
	})
	return err
}

// rollback runs Helm's rollback to toVersion with the wait c plans.
func rollback(cfg *helmaction.Configuration, obj *v2.HelmRelease, toVersion int, c Call) error {
	rollback, err := newRollback(cfg, obj, c, toVersion)
	if err != nil {
		return err
	}
	if obj.GetRollback().Recreate {
		cfg.Logger().Warn("spec.rollback.recreate is not supported by Helm 4 and is ignored", "release", c.Plan.Release)
	}
	return rollback.Run(c.Plan.Release)
}

// RollbackTarget returns the revision Helm will roll the release name back
// to: toVersion, or the one before the last when it is 0.
func RollbackTarget(cfg *helmaction.Configuration, name string, toVersion int) (*releasev1.Release, error) {
	version := toVersion
	if version == 0 {
		last, err := LastRelease(cfg, name)
		if err != nil {
			return nil, err
		}
		version = last.Version - 1
	}
	rel, err := cfg.Releases.Get(name, version)
	if err != nil {
		return nil, err
	}
	return toV1(rel, nil)
}

// newRollback maps the HelmRelease to Helm's rollback action. How it
// applies is the plan's (plan.Plan.Follow: serverSideApply auto resolved
// from the revision rolled back to).
func newRollback(cfg *helmaction.Configuration, obj *v2.HelmRelease, c Call, toVersion int) (*helmaction.Rollback, error) {
	spec, p := obj.GetRollback(), c.Plan

	rollback := helmaction.NewRollback(cfg)
	rollback.Version = toVersion
	rollback.Timeout = p.Wait.Timeout
	rollback.MaxHistory = obj.GetMaxHistory()
	rollback.DisableHooks = spec.DisableHooks
	rollback.WaitStrategy = p.Wait.Helm
	rollback.WaitOptions = waitOptions(p)
	rollback.WaitForJobs = p.Wait.WaitForJobs
	rollback.CleanupOnFail = p.CleanupOnFail

	var err error
	rollback.ServerSideApply, rollback.ForceConflicts, rollback.ForceReplace, err = applyFlags(spec.ServerSideApply, spec.Force, p)
	if err != nil {
		return nil, err
	}
	return rollback, nil
}
