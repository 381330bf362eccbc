package action

import (
	"context"
	"fmt"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// verb names the action a stack runs, in its errors and in afterHooks
// messages.
type verb string

const (
	verbInstall   verb = "install"
	verbUpgrade   verb = "upgrade"
	verbRollback  verb = "rollback"
	verbUninstall verb = "uninstall"
)

// layers says which wrappers one action runs with, besides the Helm
// configuration's own kube client and storage.
type layers struct {
	verb verb
	// timeout is the action's timeout: recreates and ordered batches end
	// by it, counted from the start of the action.
	timeout time.Duration
	// recreate lets updates recreate what the API server refuses to
	// change in place (install adopting objects, upgrade, rollback).
	recreate bool
	// chart is what install and upgrade render; nil for the others.
	chart *chartv2.Chart
	// order tells, reading storage through the configuration it is given,
	// whether and how the action applies in order; nil or a nil ordering:
	// all at once.
	order func(*helmaction.Configuration) (*ordering, error)
}

// stackedRender runs run, the install or upgrade (v) of chrt, through
// stacked: with recreate, and with ordering when the spec asks for it,
// its batches ready within the action's wait.
func stackedRender(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, v verb, chrt *chartv2.Chart, o Options, run act) (*releasev1.Release, error) {
	if obj == nil {
		return nil, errNilObject
	}
	wait := InstallWait(obj, o)
	if v == verbUpgrade {
		wait = UpgradeWait(obj, o)
	}
	l := layers{verb: v, timeout: wait.Timeout, recreate: true, chart: chrt,
		order: func(*helmaction.Configuration) (*ordering, error) {
			if !obj.IsOrdered() {
				return nil, nil
			}
			return orderedApply(chrt, wait.Timeout, wait.WaitForJobs)
		}}
	return stacked(ctx, cfg, obj, l, o, run)
}

// act runs Helm's own action on cfg with chrt (install and upgrade) and o.
type act func(cfg *helmaction.Configuration, chrt *chartv2.Chart, o Options) (*releasev1.Release, error)

// stacked runs run on cfg with the wrappers l and o ask for, stacked in
// this order, each around the one before:
//
//  1. cfg's own kube client (internal/helmclient) and storage driver
//     (Secrets, with the caller's wrappers such as the write log);
//  2. recreate (internal/recreate): an update the API server refuses in
//     place recreates the object, when allowed; it sits right on the
//     client that applies, so every apply of the action goes through it;
//  3. afterHooks (internal/afterhooks), when o.WaitStrategy says so:
//     storage holds back the deployed record until the readiness wait
//     after the post hooks passes; the client awaits hook deletions and
//     records what the apply created, for cleanupOnFail;
//  4. ordering (internal/sequencing), when l.order finds an order: the
//     client applies and deletes batch by batch, waiting for each, so it
//     is outermost and every apply of Helm reaches it first.
//
// This is the one place the action layer stacks them; TestStackOrder
// fails when the order changes.
func stacked(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, l layers, o Options, run act) (*releasev1.Release, error) {
	if l.recreate {
		cfg = withRecreate(ctx, cfg, obj, l.timeout, o)
	}
	apply := func(c *helmaction.Configuration, o Options) (*releasev1.Release, error) {
		c, chrt, o, err := withOrder(ctx, c, obj, l, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.verb, err)
		}
		return run(c, chrt, o)
	}
	if o.WaitStrategy != v2.AfterHooks || l.verb == verbUninstall {
		return apply(cfg, o)
	}
	return afterhooks.Run(ctx, cfg, afterHooksAction(obj, l.verb, o), func(c *helmaction.Configuration) (*releasev1.Release, error) {
		hookOnly := o
		hookOnly.HookOnlyWait = true
		return apply(c, hookOnly)
	})
}

// withOrder returns the configuration, chart and options of an action
// that l.order says applies in order, or c, l.chart and o unchanged. The
// chart of an ordered install or upgrade carries its record (see
// sequencing.Record), and its post renderer also checks the order of what
// it renders, so a cycle fails while Helm renders: before it stores a
// release or applies anything.
func withOrder(ctx context.Context, c *helmaction.Configuration, obj *v2.HelmRelease, l layers, o Options) (*helmaction.Configuration, *chartv2.Chart, Options, error) {
	if l.order == nil {
		return c, l.chart, o, nil
	}
	ord, err := l.order(c)
	if err != nil || ord == nil {
		return c, l.chart, o, err
	}
	if c, err = withOrdering(ctx, c, obj, *ord, o); err != nil {
		return nil, nil, o, err
	}
	chrt := l.chart
	if ord.recorded != nil {
		chrt = ord.recorded
		o.PostRenderer = sequencing.CheckOrder(o.PostRenderer, ord.charts)
	}
	return c, chrt, o, nil
}

// withKubeClient returns a copy of cfg that talks to the cluster through
// kc; storage and everything else are shared.
func withKubeClient(cfg *helmaction.Configuration, kc kube.Interface) *helmaction.Configuration {
	return helmclient.Reconfigured(cfg, kc, cfg.Releases)
}
