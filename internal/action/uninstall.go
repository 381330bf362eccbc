package action

import (
	"context"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasecommon "helm.sh/helm/v4/pkg/release"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Uninstall uninstalls the release of obj. Helm's uninstall cannot be
// cancelled, only Options.WaitContext bounds its wait for deletion; ctx
// only ends the waits between the batches of a release applied in order.
// The response's Release, when set, is a *releasev1.Release. With
// spec.uninstall.deleteHookResources the objects the release's hooks left
// are deleted once Helm's uninstall succeeded (see hookcleanup.go); a
// failure of that alone is a *HookCleanupError.
func Uninstall(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, o Options) (*releasecommon.UninstallReleaseResponse, error) {
	if obj == nil {
		return nil, errNilObject
	}
	// Read before the uninstall deletes the records. The cleanup keeps
	// cfg's own kube client: hooks belong to no resource group to order.
	cleanup := newHookCleanup(cfg, ReleaseName(obj), obj.GetUninstall().DeleteHookResources)
	// A release applied in order is deleted in reverse (see sequencing.go).
	if last, err := LastRelease(cfg, ReleaseName(obj)); err == nil {
		charts, sequenced, err := recordedOrdering(last)
		if err != nil {
			return nil, fmt.Errorf("uninstall: %w", err)
		}
		if sequenced {
			up := obj.Upstream()
			ord := ordering{charts: charts, timeout: actionTimeout(up.GetUninstall().Timeout, up), learn: last.Manifest}
			if cfg, err = withOrdering(ctx, cfg, up, ord, o); err != nil {
				return nil, fmt.Errorf("uninstall: %w", err)
			}
		}
	}
	uninstall := newUninstall(cfg, obj, o)
	res, err := uninstall.Run(ReleaseName(obj))
	if res != nil && res.Release != nil {
		rel, convErr := toV1(res.Release, nil)
		if convErr != nil {
			return res, fmt.Errorf("uninstall: %w", convErr)
		}
		res.Release = rel
	}
	if err != nil || cleanup == nil {
		return res, err
	}
	deleted, err := cleanup.run(uninstall)
	if len(deleted) > 0 && o.HookResourcesDeleted != nil {
		o.HookResourcesDeleted(deleted)
	}
	return res, err
}

// newUninstall maps the HelmRelease to Helm's uninstall action.
func newUninstall(cfg *helmaction.Configuration, obj *v2.HelmRelease, o Options) *helmaction.Uninstall {
	up := obj.Upstream()
	spec := up.GetUninstall()

	uninstall := helmaction.NewUninstall(cfg)
	uninstall.Timeout = actionTimeout(spec.Timeout, up)
	uninstall.KeepHistory = spec.KeepHistory
	uninstall.DisableHooks = spec.DisableHooks
	uninstall.WaitStrategy = waitStrategy(up, spec.GetDisableWait(), o)
	uninstall.WaitOptions = waitOptions(o)
	uninstall.DeletionPropagation = spec.GetDeletionPropagation()
	return uninstall
}
