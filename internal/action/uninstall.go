package action

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasecommon "helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// Uninstall uninstalls the release of obj. Helm's uninstall cannot be
// cancelled, only the plan's WaitContext bounds its wait for deletion; ctx
// only ends the waits between the batches of a release applied in order
// (the plan follows the order of the newest revision, as the runner read
// it).
// The response's Release, when set, is a *releasev1.Release.
//
// With spec.uninstall.deleteHookResources the objects the release's hooks
// left are deleted once Helm's uninstall is through, within what is left
// of the uninstall timeout (see uninstall_hookcleanup.go); a failure of that alone
// is a *HookCleanupError. The release records, the only list of the
// hooks, are kept until then (see internal/hookcleanup), and a release
// left uninstalled with its cleanup pending by a stopped controller gets
// only the cleanup.
func Uninstall(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, c Call) (*releasecommon.UninstallReleaseResponse, error) {
	if obj == nil {
		return nil, errNilObject
	}
	began := time.Now()
	// Read before the uninstall. The cleanup keeps cfg's own kube client:
	// hooks belong to no resource group to order.
	cleanup := newHookCleanup(cfg, obj)
	last, lastErr := LastRelease(cfg, v2.ReleaseName(obj))
	if lastErr == nil && hookcleanup.Pending(last) {
		res := &releasecommon.UninstallReleaseResponse{Release: last}
		return res, finishHookCleanup(cfg, obj, newUninstall(cfg, obj, c.Plan), cleanup, began, c.Observer)
	}
	res, uninstall, err := runHelmUninstall(ctx, cfg, obj, cleanup != nil, c)
	if cleanup == nil || uninstall == nil {
		return res, err
	}
	// Helm's uninstall may fail after it recorded the release uninstalled
	// (the wait for the deletions, a post-delete hook); Helm would have
	// deleted the records then too.
	if after, readErr := LastRelease(cfg, v2.ReleaseName(obj)); readErr != nil || !hookcleanup.Pending(after) {
		return res, err
	}
	cleanupErr := finishHookCleanup(cfg, obj, uninstall, cleanup, began, c.Observer)
	switch {
	case err == nil:
		return res, cleanupErr
	case cleanupErr != nil:
		// Helm's error is the uninstall's; the cleanup's is said, not
		// passed off as the only one (see HookCleanupError).
		return res, fmt.Errorf("%w; %s", err, cleanupErr)
	default:
		return res, err
	}
}

// runHelmUninstall runs Helm's uninstall of obj's release, in reverse
// order when the plan says its newest record was applied in order (see
// layer_ordering.go). With keepRecords, Helm keeps the records and
// describes the release with hookcleanup.PendingDescription: the caller
// deletes them after the hook cleanup. It returns the action it ran, nil
// when it could not set it up.
func runHelmUninstall(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, keepRecords bool, c Call) (*releasecommon.UninstallReleaseResponse, *helmaction.Uninstall, error) {
	var (
		res       *releasecommon.UninstallReleaseResponse
		uninstall *helmaction.Uninstall
	)
	_, err := stacked(ctx, cfg, obj, c, nil, func(cfg *helmaction.Configuration, _ *chartv2.Chart, _ postrenderer.PostRenderer) (*releasev1.Release, error) {
		var err error
		res, uninstall, err = uninstallRelease(cfg, obj, keepRecords, c.Plan)
		return nil, err
	})
	return res, uninstall, err
}

// uninstallRelease runs Helm's uninstall; see runHelmUninstall.
func uninstallRelease(cfg *helmaction.Configuration, obj *v2.HelmRelease, keepRecords bool, p plan.Plan) (*releasecommon.UninstallReleaseResponse, *helmaction.Uninstall, error) {
	uninstall := newUninstall(cfg, obj, p)
	if keepRecords {
		uninstall.KeepHistory = true
		uninstall.Description = hookcleanup.PendingDescription
	}
	res, err := uninstall.Run(v2.ReleaseName(obj))
	if res != nil && res.Release != nil {
		rel, convErr := toV1(res.Release, nil)
		if convErr != nil {
			return res, uninstall, errors.Join(err, fmt.Errorf("uninstall: %w", convErr))
		}
		res.Release = rel
	}
	return res, uninstall, err
}

// finishHookCleanup runs the cleanup of a release Helm recorded as
// uninstalled, within uninstall's timeout counted from began, tells obs
// (may be nil) what it did, and then ends the records as Helm's uninstall would have.
// cleanup is nil when obj no longer asks for it: only the records are
// ended then.
func finishHookCleanup(cfg *helmaction.Configuration, obj *v2.HelmRelease, uninstall *helmaction.Uninstall, cleanup *hookCleanup, began time.Time, obs Observer) error {
	var cleanupErr error
	if cleanup != nil {
		var report hookCleanupReport
		report, cleanupErr = cleanup.run(began.Add(uninstall.Timeout), uninstall.WaitStrategy, uninstall.WaitOptions)
		if (len(report.deleted) > 0 || len(report.left) > 0) && obs != nil {
			obs.HookResources(report.deleted, report.left)
		}
	}
	if err := endRecords(cfg, v2.ReleaseName(obj), obj.GetUninstall().KeepHistory); err != nil {
		return errors.Join(fmt.Errorf("uninstall: %w", err), cleanupErr)
	}
	return cleanupErr
}

// endRecords leaves the records of an uninstalled release as Helm's
// uninstall leaves them: all deleted, or with keepHistory the newest
// described as Helm describes it.
func endRecords(cfg *helmaction.Configuration, name string, keepHistory bool) error {
	rels, err := History(cfg, name)
	if err != nil {
		return err
	}
	if keepHistory {
		if len(rels) == 0 {
			return nil
		}
		newest := rels[0]
		newest.Info.Description = hookcleanup.CompletedDescription
		if err := cfg.Releases.Update(newest); err != nil {
			return fmt.Errorf("recording release %s uninstalled: %w", name, err)
		}
		return nil
	}
	var errs []error
	for _, rel := range rels {
		if _, err := cfg.Releases.Delete(rel.Name, rel.Version); err != nil {
			errs = append(errs, fmt.Errorf("deleting record v%d of release %s: %w", rel.Version, name, err))
		}
	}
	return errors.Join(errs...)
}

// newUninstall maps the HelmRelease to Helm's uninstall action.
func newUninstall(cfg *helmaction.Configuration, obj *v2.HelmRelease, p plan.Plan) *helmaction.Uninstall {
	spec := obj.GetUninstall()

	uninstall := helmaction.NewUninstall(cfg)
	uninstall.Timeout = p.Wait.Timeout
	uninstall.KeepHistory = spec.KeepHistory
	uninstall.DisableHooks = spec.DisableHooks
	uninstall.WaitStrategy = p.Wait.Helm
	uninstall.WaitOptions = waitOptions(p)
	uninstall.DeletionPropagation = spec.GetDeletionPropagation()
	return uninstall
}
