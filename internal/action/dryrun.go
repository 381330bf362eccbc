package action

import (
	"context"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// DryRun renders the install or upgrade c plans as Helm's server-side dry
// run does: the same options as the action (newInstall, newUpgrade), the
// cluster's capabilities and lookups, Helm storage read for the release
// it upgrades, and nothing written. It applies no CRDs and stacks none of
// the feature wrappers: they act on objects, and a dry run has none to
// act on. The release returned holds the manifest and hooks the action
// would apply.
func DryRun(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call) (*releasev1.Release, error) {
	switch c.Plan.Verb {
	case plan.Install:
		install, err := newInstall(cfg, obj, c)
		if err != nil {
			return nil, err
		}
		install.DryRunStrategy = helmaction.DryRunServer
		return toV1(install.RunWithContext(ctx, chrt, values))
	case plan.Upgrade:
		var lastApplyMethod string
		if last, err := LastRelease(cfg, c.Plan.Release); err == nil {
			lastApplyMethod = last.ApplyMethod
		}
		upgrade, err := newUpgrade(cfg, obj, c, lastApplyMethod)
		if err != nil {
			return nil, err
		}
		upgrade.DryRunStrategy = helmaction.DryRunServer
		return toV1(upgrade.RunWithContext(ctx, c.Plan.Release, chrt, values))
	}
	return nil, fmt.Errorf("a dry run renders an install or an upgrade, not %s", c.Plan.Verb)
}
