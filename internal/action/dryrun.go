package action

import (
	"context"
	"fmt"
	"slices"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// Rendered is what a dry run rendered.
type Rendered struct {
	// CRDs is what the action's CRD step would do to the chart's crds/
	// (applyCRDs), checked with reads and server-side dry runs.
	CRDs CRDPlan
	// Release holds the manifest and hooks the action would apply.
	Release *releasev1.Release
	// OfflineKinds are the kinds ("Kind.group") of the chart's crds/ that
	// the API server does not serve yet. An install applies those CRDs
	// before it renders; a dry run cannot, and Helm's server dry run
	// cannot map their objects, so the manifest was then rendered without
	// the server: Helm's client dry run with the cluster's version and
	// API versions (lookups find nothing). Empty: rendered with the server.
	OfflineKinds []string
}

// DryRun renders the install or upgrade c plans as Helm's server-side dry
// run does: the same options as the action (newInstall, newUpgrade), the
// cluster's capabilities and lookups, Helm storage read for the release
// it upgrades, and nothing written. It applies no CRDs (it says what the
// CRD step would do to each, planCRDs) and stacks none of
// the feature wrappers: they act on objects, and a dry run has none to
// act on. An install that fails because its objects need the kinds of
// the chart's crds/ is rendered again without the server (see Rendered).
func DryRun(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call) (Rendered, error) {
	switch c.Plan.Verb {
	case plan.Install:
		install, err := newInstall(cfg, obj, c)
		if err != nil {
			return Rendered{}, err
		}
		step, err := installCRDStep(obj, install, values)
		if err != nil {
			return Rendered{}, err
		}
		crds, err := planCRDs(ctx, cfg, chrt, step)
		if err != nil {
			return Rendered{}, err
		}
		install.DryRunStrategy = helmaction.DryRunServer
		rel, err := toV1(install.RunWithContext(ctx, chrt, values))
		if err == nil {
			return Rendered{Release: rel, CRDs: crds}, nil
		}
		offline, kindsErr := unservedCRDKinds(cfg, chrt)
		if kindsErr != nil || len(offline) == 0 {
			return Rendered{}, err
		}
		out, err := dryRunOffline(ctx, cfg, obj, chrt, values, c, offline)
		out.CRDs = crds
		return out, err
	case plan.Upgrade:
		var lastApplyMethod string
		if last, err := LastRelease(cfg, c.Plan.Release); err == nil {
			lastApplyMethod = last.ApplyMethod
		}
		upgrade, err := newUpgrade(cfg, obj, c, lastApplyMethod)
		if err != nil {
			return Rendered{}, err
		}
		step, err := upgradeCRDStep(obj, upgrade, lastApplyMethod, values)
		if err != nil {
			return Rendered{}, err
		}
		crds, err := planCRDs(ctx, cfg, chrt, step)
		if err != nil {
			return Rendered{}, err
		}
		upgrade.DryRunStrategy = helmaction.DryRunServer
		rel, err := toV1(upgrade.RunWithContext(ctx, c.Plan.Release, chrt, values))
		return Rendered{Release: rel, CRDs: crds}, err
	}
	return Rendered{}, fmt.Errorf("a dry run renders an install or an upgrade, not %s", c.Plan.Verb)
}

// dryRunOffline renders the install with Helm's client dry run, given the
// cluster's version and API versions plus those of the chart's CRDs, on a
// configuration of its own: the client dry run replaces the
// configuration's kube client and storage with stand-ins.
func dryRunOffline(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call, offline []crdKind) (Rendered, error) {
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return Rendered{}, fmt.Errorf("reading the cluster's API versions: %w", err)
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return Rendered{}, fmt.Errorf("reading the cluster's version: %w", err)
	}
	versions, err := helmaction.GetVersionSet(dc)
	if err != nil {
		return Rendered{}, fmt.Errorf("reading the cluster's API versions: %w", err)
	}
	own := helmaction.NewConfiguration()
	own.RESTClientGetter, own.KubeClient, own.Releases = cfg.RESTClientGetter, cfg.KubeClient, cfg.Releases
	install, err := newInstall(own, obj, c)
	if err != nil {
		return Rendered{}, err
	}
	install.DryRunStrategy = helmaction.DryRunClient
	install.KubeVersion = &common.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor}
	install.APIVersions = versions
	kinds := make([]string, 0, len(offline))
	for _, k := range offline {
		install.APIVersions = append(install.APIVersions, k.group+"/"+k.version, k.group+"/"+k.version+"/"+k.kind)
		if name := k.kind + "." + k.group; !slices.Contains(kinds, name) {
			kinds = append(kinds, name)
		}
	}
	rel, err := toV1(install.RunWithContext(ctx, chrt, values))
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Release: rel, OfflineKinds: kinds}, nil
}
