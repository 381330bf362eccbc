package action

import (
	"context"
	"fmt"
	"io"
	"slices"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
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
	// the API server does not serve yet. An install or upgrade applies
	// those CRDs before it renders; a dry run cannot, and Helm's server dry run
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
// act on. An install or upgrade that fails because its objects need the
// kinds of the chart's crds/ is rendered again without the server (see
// Rendered).
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
		upgrade, err := newUpgrade(cfg, obj, c)
		if err != nil {
			return Rendered{}, err
		}
		step, err := upgradeCRDStep(obj, upgrade, c.Plan, values)
		if err != nil {
			return Rendered{}, err
		}
		crds, err := planCRDs(ctx, cfg, chrt, step)
		if err != nil {
			return Rendered{}, err
		}
		upgrade.DryRunStrategy = helmaction.DryRunServer
		rel, err := toV1(upgrade.RunWithContext(ctx, c.Plan.Release, chrt, values))
		if err == nil {
			return Rendered{Release: rel, CRDs: crds}, nil
		}
		offline, kindsErr := unservedCRDKinds(cfg, chrt)
		if kindsErr != nil || len(offline) == 0 {
			return Rendered{}, err
		}
		out, err := dryRunUpgradeOffline(ctx, cfg, obj, chrt, values, c, offline)
		out.CRDs = crds
		return out, err
	}
	return Rendered{}, fmt.Errorf("a dry run renders an install or an upgrade, not %s", c.Plan.Verb)
}

// dryRunOffline renders the install with Helm's client dry run, given the
// cluster's version and API versions plus those of the chart's CRDs, on a
// configuration of its own: the client dry run replaces the
// configuration's kube client and storage with stand-ins.
func dryRunOffline(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call, offline []crdKind) (Rendered, error) {
	caps, kinds, err := offlineCapabilities(cfg, offline)
	if err != nil {
		return Rendered{}, err
	}
	own := helmaction.NewConfiguration()
	own.RESTClientGetter, own.KubeClient, own.Releases = cfg.RESTClientGetter, cfg.KubeClient, cfg.Releases
	install, err := newInstall(own, obj, c)
	if err != nil {
		return Rendered{}, err
	}
	install.DryRunStrategy = helmaction.DryRunClient
	install.KubeVersion = &caps.KubeVersion
	install.APIVersions = caps.APIVersions
	rel, err := toV1(install.RunWithContext(ctx, chrt, values))
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Release: rel, OfflineKinds: kinds}, nil
}

// dryRunUpgradeOffline renders the upgrade with Helm's client dry run over
// the release in storage, with the capabilities of dryRunOffline. Helm's
// upgrade builds the objects of both manifests with its kube client even
// then, which cannot map the kinds the cluster does not serve yet, so the
// configuration of its own has Helm's printing stand-in as kube client, as
// the install's client dry run does: objects are compared by the preview,
// not by Helm.
func dryRunUpgradeOffline(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, chrt *chartv2.Chart, values map[string]any, c Call, offline []crdKind) (Rendered, error) {
	caps, kinds, err := offlineCapabilities(cfg, offline)
	if err != nil {
		return Rendered{}, err
	}
	own := helmaction.NewConfiguration()
	own.RESTClientGetter, own.Releases, own.Capabilities = cfg.RESTClientGetter, cfg.Releases, caps
	own.KubeClient = &kubefake.PrintingKubeClient{Out: io.Discard}
	upgrade, err := newUpgrade(own, obj, c)
	if err != nil {
		return Rendered{}, err
	}
	upgrade.DryRunStrategy = helmaction.DryRunClient
	rel, err := toV1(upgrade.RunWithContext(ctx, c.Plan.Release, chrt, values))
	if err != nil {
		return Rendered{}, err
	}
	return Rendered{Release: rel, OfflineKinds: kinds}, nil
}

// offlineCapabilities are the cluster's version and API versions plus those
// of the kinds the chart's CRDs add, and the names ("Kind.group") of those
// kinds.
func offlineCapabilities(cfg *helmaction.Configuration, offline []crdKind) (*common.Capabilities, []string, error) {
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cluster's API versions: %w", err)
	}
	version, err := dc.ServerVersion()
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cluster's version: %w", err)
	}
	versions, err := helmaction.GetVersionSet(dc)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cluster's API versions: %w", err)
	}
	kinds := make([]string, 0, len(offline))
	for _, k := range offline {
		versions = append(versions, k.group+"/"+k.version, k.group+"/"+k.version+"/"+k.kind)
		if name := k.kind + "." + k.group; !slices.Contains(kinds, name) {
			kinds = append(kinds, name)
		}
	}
	return &common.Capabilities{
		KubeVersion: common.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor},
		APIVersions: versions,
		HelmVersion: common.DefaultCapabilities.HelmVersion,
	}, kinds, nil
}
