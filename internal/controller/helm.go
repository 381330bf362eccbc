package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/postrenderer"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/drift"
	"github.com/afterhooks/helm-controller/internal/kube"
	"github.com/afterhooks/helm-controller/internal/postrender"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// helmRunner gives the state machine the Helm actions of one HelmRelease.
type helmRunner struct {
	cfg *helmaction.Configuration
	// getter reaches the release's target cluster as its identity; cfg's
	// kube client and storage use it too.
	getter genericclioptions.RESTClientGetter
	// target says which cluster and identity that is.
	target *kube.Target
	obj    *v2.HelmRelease
	opts   action.Options
	// defaultWait is the waitStrategy of actions that leave it unset.
	defaultWait v2.HookWaitStrategy
	// recorder receives the afterHooks events; may be nil.
	recorder reconcile.EventRecorder
	// progress reports afterHooks phases in the Reconciling condition; may
	// be nil.
	progress *progressReporter
	// fieldManager is the field manager Helm applies objects with; drift
	// is compared and corrected as this manager.
	fieldManager string
	// overrideManagers are the --override-manager field managers whose
	// fields drift correction takes over.
	overrideManagers []string
	// driftIgnore are the compiled spec.driftDetection ignore rules.
	driftIgnore []jsondiff.IgnoreRule
	// drift is built on first use by driftChecker.
	drift *drift.Checker
	// newRevision cancels readiness waits when a new reconcile is queued
	// (CancelHealthCheckOnNewRevision); its context is opts.WaitContext.
	// Nil when the gate is off.
	newRevision *newRevisionWatch
}

func (h *helmRunner) releaseName() string { return action.ReleaseName(h.obj) }

// RESTClientGetter is the release's target cluster and identity, for code
// beside the Helm actions (inventory, drift detection) that must look at
// the same objects the release applied.
func (h *helmRunner) RESTClientGetter() genericclioptions.RESTClientGetter { return h.getter }

// RESTConfig is the REST config of the target, impersonation included.
func (h *helmRunner) RESTConfig() (*rest.Config, error) { return h.getter.ToRESTConfig() }

// RESTMapper is the target cluster's REST mapper.
func (h *helmRunner) RESTMapper() (apimeta.RESTMapper, error) { return h.getter.ToRESTMapper() }

func (h *helmRunner) LastRelease(context.Context) (*releasev1.Release, error) {
	return action.LastRelease(h.cfg, h.releaseName())
}

func (h *helmRunner) Install(ctx context.Context, chart *chartv2.Chart, values map[string]any) (*releasev1.Release, error) {
	obj := h.obj
	// Helm refuses to install over a failed or uninstalled release unless
	// told to replace it; for us both mean "install again".
	if last, err := h.LastRelease(ctx); err == nil && last.Info != nil &&
		(last.Info.Status == common.StatusFailed || last.Info.Status == common.StatusUninstalled) {
		obj = obj.DeepCopy()
		install := obj.GetInstall()
		install.Replace = true
		obj.Spec.Install = &install
	}
	pr, err := h.postRenderer()
	if err != nil {
		return nil, err
	}
	if afterHooksInstall(obj, h.defaultWait) {
		return h.runAfterHooks(ctx, "install", action.InstallWait(obj, h.opts),
			func(cfg *helmaction.Configuration, o action.Options) (*releasev1.Release, error) {
				o.PostRenderer = pr
				return action.Install(ctx, cfg, obj, chart, values, o)
			})
	}
	defer observePhase("install", v2.BeforeHooks, "helm", time.Now())
	opts := h.opts
	opts.PostRenderer = pr
	rel, err := action.Install(ctx, h.cfg, obj, chart, values, opts)
	return rel, h.newRevision.canceled(err)
}

func (h *helmRunner) Upgrade(ctx context.Context, chart *chartv2.Chart, values map[string]any) (*releasev1.Release, error) {
	pr, err := h.postRenderer()
	if err != nil {
		return nil, err
	}
	if afterHooksUpgrade(h.obj, h.defaultWait) {
		return h.runAfterHooks(ctx, "upgrade", action.UpgradeWait(h.obj, h.opts),
			func(cfg *helmaction.Configuration, o action.Options) (*releasev1.Release, error) {
				o.PostRenderer = pr
				return action.Upgrade(ctx, cfg, h.obj, chart, values, o)
			})
	}
	defer observePhase("upgrade", v2.BeforeHooks, "helm", time.Now())
	opts := h.opts
	opts.PostRenderer = pr
	rel, err := action.Upgrade(ctx, h.cfg, h.obj, chart, values, opts)
	return rel, h.newRevision.canceled(err)
}

// postRenderer builds the post renderer install and upgrade run on the
// rendered manifests (spec.postRenderers, spec.commonMetadata and the origin
// labels). Rollback needs none: it re-applies a stored, already
// post-rendered manifest. Invalid post renderers fail the action before
// Helm renders anything.
func (h *helmRunner) postRenderer() (postrenderer.PostRenderer, error) {
	return postrender.Build(&h.obj.Spec.HelmReleaseSpec, h.obj.Name, h.obj.Namespace)
}

func (h *helmRunner) Test(ctx context.Context) (*releasev1.Release, error) {
	return action.Test(ctx, h.cfg, h.obj, h.opts)
}

func (h *helmRunner) Rollback(ctx context.Context, toVersion int) error {
	if afterHooksRollback(h.obj, h.defaultWait) {
		_, err := h.runAfterHooks(ctx, "rollback", action.RollbackWait(h.obj, h.opts),
			func(cfg *helmaction.Configuration, o action.Options) (*releasev1.Release, error) {
				return nil, action.Rollback(ctx, cfg, h.obj, toVersion, o)
			})
		return err
	}
	defer observePhase("rollback", v2.BeforeHooks, "helm", time.Now())
	return h.newRevision.canceled(action.Rollback(ctx, h.cfg, h.obj, toVersion, h.opts))
}

func (h *helmRunner) Uninstall(ctx context.Context) error {
	_, err := action.Uninstall(ctx, h.cfg, h.obj, h.opts)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return err
}

// Unlock marks a pending release failed in storage.
func (h *helmRunner) Unlock(_ context.Context, rel *releasev1.Release) error {
	// Upstream's wording, which `helm history` shows either way.
	rel.SetStatus(common.StatusFailed, fmt.Sprintf("Release unlocked from stale '%s' state", rel.Info.Status))
	if err := h.cfg.Releases.Update(rel); err != nil {
		return fmt.Errorf("updating release in storage: %w", err)
	}
	return nil
}

// loadedChart adapts a cached chart to the state machine's Chart.
type loadedChart struct{ c *chartsource.Chart }

func (l loadedChart) Metadata() *chartv2.Metadata   { return l.c.Metadata }
func (l loadedChart) Load() (*chartv2.Chart, error) { return l.c.Load() }
