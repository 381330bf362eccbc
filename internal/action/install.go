package action

import (
	"context"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Install installs chrt with values as the release of obj, after applying
// the chart's CRDs per spec.install.crds. The returned release is the one
// Helm recorded, also when err is set (for instance a failed release after a
// failed wait), or nil when Helm got no further than validation.
func Install(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, o Options) (*releasev1.Release, error) {
	// An install that adopts objects already in the cluster (replace after
	// a failed install, taking over what was kept) updates them, and may
	// be refused as an upgrade may: it recreates as an upgrade does.
	return stackedRender(ctx, cfg, obj, verbInstall, chrt, o, func(c *helmaction.Configuration, chrt *chartv2.Chart, o Options) (*releasev1.Release, error) {
		return install(ctx, c, obj, chrt, values, o)
	})
}

// install runs Helm's install with the wait o asks for.
func install(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, o Options) (*releasev1.Release, error) {
	install, err := newInstall(cfg, obj, o)
	if err != nil {
		return nil, err
	}
	policy, err := installCRDPolicy(obj.GetInstall().Install)
	if err != nil {
		return nil, err
	}
	if err := applyCRDs(cfg, chrt, crdApply{
		policy:     policy,
		serverSide: install.ServerSideApply,
		wait:       install.WaitStrategy,
		waitOpts:   install.WaitOptions,
	}); err != nil {
		return nil, fmt.Errorf("install: %w", err)
	}
	cfg.Releases.MaxHistory = obj.GetMaxHistory()

	rel, runErr := install.RunWithContext(ctx, chrt, values)
	return toV1(rel, runErr)
}

// newInstall maps the HelmRelease to Helm's install action.
func newInstall(cfg *helmaction.Configuration, obj *v2.HelmRelease, o Options) (*helmaction.Install, error) {
	spec := obj.GetInstall()

	install := helmaction.NewInstall(cfg)
	install.ReleaseName = shortenReleaseName(obj.GetReleaseName())
	install.Namespace = obj.GetReleaseNamespace()
	install.Timeout = actionTimeout(spec.Timeout, obj)
	install.CreateNamespace = spec.CreateNamespace
	install.Replace = spec.Replace
	install.DisableHooks = spec.DisableHooks
	install.DisableOpenAPIValidation = spec.DisableOpenAPIValidation
	install.SkipSchemaValidation = spec.DisableSchemaValidation
	install.TakeOwnership = !spec.DisableTakeOwnership
	install.WaitStrategy = waitStrategy(obj, spec.DisableWait, o)
	install.WaitOptions = waitOptions(o)
	install.WaitForJobs = !spec.DisableWaitForJobs
	// CRDs are applied by applyCRDs before the action runs.
	install.SkipCRDs = true
	install.EnableDNS = o.AllowDNSLookups
	install.PostRenderer = o.PostRenderer

	install.ServerSideApply = !o.UseHelm3Defaults
	if spec.ServerSideApply != nil {
		install.ServerSideApply = *spec.ServerSideApply
	}
	// Install has no force field: nothing is replaced client-side.
	install.ForceConflicts, _ = forceFlags(install.ServerSideApply, false)

	prs, err := postRenderStrategy(obj, o)
	if err != nil {
		return nil, err
	}
	install.PostRenderStrategy = prs
	return install, nil
}
