package action

import (
	"context"
	"errors"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Rollback rolls the release of obj back to revision toVersion; 0 means the
// revision before the last one, as in Helm. Helm's rollback cannot be
// cancelled, only Options.WaitContext bounds its wait; under afterHooks ctx
// ending interrupts the readiness wait, which leaves the revision pending.
//
// spec.rollback.recreate has no Helm 4 equivalent (Helm removed pod
// recreation); it is ignored with a warning in Helm's log, as upstream does.
func Rollback(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, toVersion int, o Options) error {
	if obj == nil {
		return errNilObject
	}
	if toVersion < 0 {
		return errors.New("rollback: negative target revision")
	}
	spec := obj.GetRollback()
	cfg = withRecreate(ctx, cfg, obj, actionTimeout(spec.Timeout, obj.Upstream()), o)
	if afterHooks(obj, verbRollback, o) {
		_, err := runAfterHooks(ctx, cfg, obj, verbRollback, o, func(c *helmaction.Configuration, o Options) (*releasev1.Release, error) {
			return nil, rollback(ctx, c, obj, toVersion, o)
		})
		return err
	}
	return rollback(ctx, cfg, obj, toVersion, o)
}

// rollback runs Helm's rollback with the wait o asks for.
func rollback(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, toVersion int, o Options) error {
	name := ReleaseName(obj)
	// Helm decides "auto" from the revision rolled back to, and so does
	// the order: the revision's own (see sequencing.go).
	var targetApplyMethod string
	if target, err := rollbackTarget(cfg, name, toVersion); err == nil {
		targetApplyMethod = target.ApplyMethod
		charts, sequenced, err := recordedOrdering(target)
		if err != nil {
			return fmt.Errorf("rollback: %w", err)
		}
		if sequenced {
			spec := obj.GetRollback()
			up := obj.Upstream()
			ord := ordering{charts: charts, timeout: actionTimeout(spec.Timeout, up), waitForJobs: !spec.DisableWaitForJobs}
			if cfg, err = withOrdering(ctx, cfg, up, ord, o); err != nil {
				return fmt.Errorf("rollback: %w", err)
			}
		}
	}
	rollback, err := newRollback(cfg, obj, o, toVersion, targetApplyMethod)
	if err != nil {
		return err
	}
	if obj.GetRollback().Recreate {
		cfg.Logger().Warn("spec.rollback.recreate is not supported by Helm 4 and is ignored", "release", name)
	}
	return rollback.Run(name)
}

// rollbackTarget returns the revision Helm will roll back to.
func rollbackTarget(cfg *helmaction.Configuration, name string, toVersion int) (*releasev1.Release, error) {
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

// newRollback maps the HelmRelease to Helm's rollback action.
// targetApplyMethod is the apply method of the revision rolled back to; it
// only matters for serverSideApply auto.
func newRollback(cfg *helmaction.Configuration, obj *v2.HelmRelease, o Options, toVersion int, targetApplyMethod string) (*helmaction.Rollback, error) {
	up := obj.Upstream()
	spec := obj.GetRollback()

	rollback := helmaction.NewRollback(cfg)
	rollback.Version = toVersion
	rollback.Timeout = actionTimeout(spec.Timeout, up)
	rollback.MaxHistory = up.GetMaxHistory()
	rollback.DisableHooks = spec.DisableHooks
	rollback.WaitStrategy = waitStrategy(up, spec.DisableWait, o)
	rollback.WaitOptions = waitOptions(o)
	rollback.WaitForJobs = !spec.DisableWaitForJobs
	rollback.CleanupOnFail = spec.CleanupOnFail

	mode, err := ssaMode(spec.ServerSideApply)
	if err != nil {
		return nil, err
	}
	rollback.ServerSideApply = mode
	rollback.ForceConflicts, rollback.ForceReplace = forceFlags(resolveSSA(mode, targetApplyMethod), spec.Force)
	return rollback, nil
}
