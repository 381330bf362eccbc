package action

import (
	"context"
	"errors"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/recreate"
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
	name := ReleaseName(obj)
	wait := RollbackWait(obj, o)
	// What the revision rolled back from consented to recreate, the
	// rollback may recreate back (docs/immutable.md).
	if from, err := LastRelease(cfg, name); err == nil {
		o.RecreateRolledBackFrom = recreate.ConsentsOf(from.Manifest)
	}
	// Helm decides "auto" from the revision rolled back to, and so does
	// the order: the revision's own (see layer_ordering.go).
	var target *releasev1.Release
	l := layers{verb: verbRollback, timeout: wait.Timeout, recreate: true,
		order: func(c *helmaction.Configuration) (*ordering, error) {
			var err error
			if target, err = rollbackTarget(c, name, toVersion); err != nil {
				target = nil
				return nil, nil
			}
			charts, sequenced, err := recordedOrdering(target)
			if err != nil || !sequenced {
				return nil, err
			}
			return &ordering{charts: charts, timeout: wait.Timeout, waitForJobs: wait.WaitForJobs}, nil
		}}
	_, err := stacked(ctx, cfg, obj, l, o, func(c *helmaction.Configuration, _ *chartv2.Chart, o Options) (*releasev1.Release, error) {
		return nil, rollback(c, obj, toVersion, target, o)
	})
	return err
}

// rollback runs Helm's rollback to toVersion, whose stored revision is
// target (nil when it could not be read: Helm then says why), with the
// wait o asks for.
func rollback(cfg *helmaction.Configuration, obj *v2.HelmRelease, toVersion int, target *releasev1.Release, o Options) error {
	name := ReleaseName(obj)
	var targetApplyMethod string
	if target != nil {
		targetApplyMethod = target.ApplyMethod
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
	spec := obj.GetRollback()

	rollback := helmaction.NewRollback(cfg)
	rollback.Version = toVersion
	rollback.Timeout = actionTimeout(spec.Timeout, obj)
	rollback.MaxHistory = obj.GetMaxHistory()
	rollback.DisableHooks = spec.DisableHooks
	rollback.WaitStrategy = waitStrategy(obj, spec.DisableWait, o)
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
