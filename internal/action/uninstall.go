package action

import (
	"context"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasecommon "helm.sh/helm/v4/pkg/release"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Uninstall uninstalls the release of obj. ctx is accepted for symmetry:
// Helm's uninstall cannot be cancelled, only Options.WaitContext bounds its
// wait for deletion. The response's Release, when set, is a
// *releasev1.Release.
func Uninstall(_ context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, o Options) (*releasecommon.UninstallReleaseResponse, error) {
	if obj == nil {
		return nil, errNilObject
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
