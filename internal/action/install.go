package action

import (
	"context"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Install installs chrt with values as the release of obj, after applying
// the chart's CRDs per spec.install.crds. The returned release is the one
// Helm recorded, also when err is set (for instance a failed release after a
// failed wait), or nil when Helm got no further than validation.
//
// An install that adopts objects already in the cluster (replace after a
// failed install, taking over what was kept) updates them, and may be
// refused as an upgrade may: its plan recreates as an upgrade's does.
func Install(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call) (*releasev1.Release, error) {
	return stacked(ctx, cfg, obj, c, chrt, func(cfg *helmaction.Configuration, chrt *chartv2.Chart, pr postrenderer.PostRenderer) (*releasev1.Release, error) {
		return install(ctx, cfg, obj, chrt, values, withPostRenderer(c, pr))
	})
}

// install runs Helm's install with the wait c plans.
func install(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call) (*releasev1.Release, error) {
	install, err := newInstall(cfg, obj, c)
	if err != nil {
		return nil, err
	}
	crds, err := installCRDStep(obj, install, values)
	if err != nil {
		return nil, err
	}
	if err := applyCRDs(cfg, chrt, crds); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	// As upstream, an install prunes no history (only upgrades and
	// rollbacks apply maxHistory), even when it replaces kept records;
	// a configuration an earlier action of this reconcile used may carry
	// that action's limit.
	cfg.Releases.MaxHistory = 0

	rel, runErr := install.RunWithContext(ctx, chrt, values)
	return toV1(rel, runErr)
}

// newInstall maps the HelmRelease to Helm's install action.
func newInstall(cfg *helmaction.Configuration, obj *v2.HelmRelease, c Call) (*helmaction.Install, error) {
	spec, p := obj.GetInstall(), c.Plan

	install := helmaction.NewInstall(cfg)
	install.ReleaseName = p.Release
	install.Namespace = obj.GetReleaseNamespace()
	install.Timeout = p.Wait.Timeout
	// Only a targetNamespace is created, as upstream does: the HelmRelease's
	// own namespace exists, and Helm's server-side apply of it would only
	// add a label that upstream never writes.
	install.CreateNamespace = spec.CreateNamespace && obj.Spec.TargetNamespace != ""
	install.Replace = spec.Replace
	install.DisableHooks = spec.DisableHooks
	install.DisableOpenAPIValidation = spec.DisableOpenAPIValidation
	install.SkipSchemaValidation = spec.DisableSchemaValidation
	install.TakeOwnership = !spec.DisableTakeOwnership
	install.WaitStrategy = p.Wait.Helm
	install.WaitOptions = waitOptions(p)
	install.WaitForJobs = p.Wait.WaitForJobs
	// CRDs are applied by applyCRDs before the action runs.
	install.SkipCRDs = true
	install.EnableDNS = c.Config.AllowDNSLookups
	install.PostRenderer = p.PostRenderer

	apply, err := plannedApply(p)
	if err != nil {
		return nil, err
	}
	install.ServerSideApply = apply.ServerSide
	// Install has no force field: nothing is replaced client-side.
	install.ForceConflicts, _ = forceFlags(install.ServerSideApply, false)

	prs, err := postRenderStrategy(p)
	if err != nil {
		return nil, err
	}
	install.PostRenderStrategy = prs
	return install, nil
}
