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

// Upgrade upgrades the release of obj to chrt with values, after applying
// the chart's CRDs per spec.upgrade.crds. Whether to upgrade or reinstall
// on a chart name change is the caller's decision. The returned release is
// the one Helm recorded, also when err is set, or nil when Helm got no
// further than validation.
func Upgrade(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call) (*releasev1.Release, error) {
	return stacked(ctx, cfg, obj, c, chrt, func(cfg *helmaction.Configuration, chrt *chartv2.Chart, pr postrenderer.PostRenderer) (*releasev1.Release, error) {
		return upgrade(ctx, cfg, obj, chrt, values, withPostRenderer(c, pr))
	})
}

// newUpgrade maps the HelmRelease to Helm's upgrade action. How it applies
// is the plan's (plan.Plan.Upgrading: serverSideApply auto resolved from
// the release's newest revision, as the runner read it).
func newUpgrade(cfg *helmaction.Configuration, obj *v2.HelmRelease, c Call) (*helmaction.Upgrade, error) {
	spec, p := obj.GetUpgrade(), c.Plan

	upgrade := helmaction.NewUpgrade(cfg)
	upgrade.Namespace = obj.GetReleaseNamespace()
	upgrade.Timeout = p.Wait.Timeout
	upgrade.MaxHistory = obj.GetMaxHistory()
	upgrade.DisableHooks = spec.DisableHooks
	upgrade.DisableOpenAPIValidation = spec.DisableOpenAPIValidation
	upgrade.SkipSchemaValidation = spec.DisableSchemaValidation
	upgrade.TakeOwnership = !spec.DisableTakeOwnership
	upgrade.WaitStrategy = p.Wait.Helm
	upgrade.WaitOptions = waitOptions(p)
	upgrade.WaitForJobs = p.Wait.WaitForJobs
	upgrade.CleanupOnFail = p.CleanupOnFail
	// preserveValues merges the last release's values under the new ones;
	// otherwise the new values are the whole truth.
	upgrade.ReuseValues = spec.PreserveValues
	upgrade.ResetValues = !spec.PreserveValues
	// CRDs are applied by applyCRDs before the action runs.
	upgrade.SkipCRDs = true
	upgrade.EnableDNS = c.Config.AllowDNSLookups
	upgrade.PostRenderer = p.PostRenderer

	var err error
	upgrade.ServerSideApply, upgrade.ForceConflicts, upgrade.ForceReplace, err = applyFlags(spec.ServerSideApply, spec.Force, p)
	if err != nil {
		return nil, err
	}

	prs, err := postRenderStrategy(p)
	if err != nil {
		return nil, err
	}
	upgrade.PostRenderStrategy = prs
	return upgrade, nil
}

// upgrade runs Helm's upgrade with the wait c plans.
func upgrade(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call) (*releasev1.Release, error) {
	name := c.Plan.Release
	upgrade, err := newUpgrade(cfg, obj, c)
	if err != nil {
		return nil, err
	}
	crds, err := upgradeCRDStep(obj, upgrade, c.Plan, values)
	if err != nil {
		return nil, err
	}
	if err := applyCRDs(cfg, chrt, crds); err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}

	rel, runErr := upgrade.RunWithContext(ctx, name, chrt, values)
	return toV1(rel, runErr)
}
