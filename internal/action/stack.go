package action

import (
	"context"
	"fmt"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// stacked runs run, Helm's install, upgrade, rollback or uninstall as c
// plans it, on cfg with the wrappers the plan asks for, each around the
// one before, in the order below (TestStackOrder fails when it changes):
//
//  1. cfg's own kube client (internal/helmclient) and storage driver
//     (Secrets, with the caller's wrappers such as the write log), the
//     driver wrapped by the mark of c (internal/ownrevision) when it has
//     one, so that every write of the revision the action creates, the
//     afterHooks wrapper's included, carries the mark;
//  2. recreate (internal/recreate), with the plan's policy: an update the
//     API server refuses in place recreates the object, when allowed; it
//     sits right on the client that applies, so every apply of the action
//     goes through it;
//  3. afterHooks (internal/afterhooks), when the hook order is afterHooks:
//     storage holds back the deployed record until the readiness wait
//     after the post hooks passes; the client awaits hook deletions and
//     records what the apply created, for cleanupOnFail;
//  4. ordering (internal/sequencing), when the plan orders the action: the
//     client applies and deletes batch by batch, waiting for each, so it
//     is outermost and every apply of Helm reaches it first.
//
// chrt is what install and upgrade render, nil for the others.
func stacked(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, c Call, chrt *chartv2.Chart, run act) (*releasev1.Release, error) {
	if obj == nil {
		return nil, errNilObject
	}
	cfg = withMark(cfg, c)
	cfg = withRecreate(ctx, cfg, c)
	cfg, finish, err := withAfterHooks(ctx, cfg, c)
	if err != nil {
		return nil, err
	}
	cfg, chrt, pr, err := withOrder(ctx, cfg, c, chrt)
	if err != nil {
		return finish(nil, fmt.Errorf("%s: %w", c.Plan.Verb, err))
	}
	return finish(run(cfg, chrt, pr))
}

// act runs Helm's own action on cfg with chrt (install and upgrade) and
// the post renderer pr.
type act func(cfg *helmaction.Configuration, chrt *chartv2.Chart, pr postrenderer.PostRenderer) (*releasev1.Release, error)

// withOrder returns the configuration, chart and post renderer of an
// action that the plan orders, or cfg, chrt and the plan's post renderer
// unchanged. The chart of an ordered install or upgrade carries its record
// (see sequencing.Record), and its post renderer also checks the order of
// what it renders, so a cycle fails while Helm renders: before it stores a
// release or applies anything.
func withOrder(ctx context.Context, cfg *helmaction.Configuration, c Call, chrt *chartv2.Chart) (*helmaction.Configuration, *chartv2.Chart, postrenderer.PostRenderer, error) {
	p := c.Plan
	if !p.Ordering.Ordered() {
		return cfg, chrt, p.PostRenderer, nil
	}
	charts, recorded := p.Ordering.Charts, chrt
	if p.Ordering.From == plan.FromSpec {
		var err error
		if recorded, charts, err = orderChart(chrt); err != nil {
			return nil, nil, nil, err
		}
	}
	cfg, err := withOrdering(ctx, cfg, c, charts)
	if err != nil {
		return nil, nil, nil, err
	}
	if p.Ordering.From != plan.FromSpec {
		return cfg, chrt, p.PostRenderer, nil
	}
	return cfg, recorded, sequencing.CheckOrder(p.PostRenderer, charts), nil
}

// withMark returns a copy of cfg whose storage marks the revision the
// action creates with c's mark, or cfg when c has none.
func withMark(cfg *helmaction.Configuration, c Call) *helmaction.Configuration {
	if c.Mark == nil || cfg.Releases == nil {
		return cfg
	}
	store := storage.Init(ownrevision.Stamp(cfg.Releases.Driver, *c.Mark))
	store.MaxHistory = cfg.Releases.MaxHistory
	store.SetLogger(cfg.Logger().Handler())
	return helmclient.Reconfigured(cfg, cfg.KubeClient, store)
}

// withKubeClient returns a copy of cfg that talks to the cluster through
// kc; storage and everything else are shared.
func withKubeClient(cfg *helmaction.Configuration, kc kube.Interface) *helmaction.Configuration {
	return helmclient.Reconfigured(cfg, kc, cfg.Releases)
}
