package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// AfterHooksWaitingReason is the reason of the Normal event emitted when an
// install, upgrade or rollback with waitStrategy afterHooks has run its
// post hooks and the readiness wait of its resources starts.
const AfterHooksWaitingReason = "AfterHooksWaiting"

// AfterHooksStartedReason is the reason of the Normal event emitted when an
// action with waitStrategy afterHooks starts: hooks and apply come first.
const AfterHooksStartedReason = "AfterHooksStarted"

// afterHooksInstall, afterHooksUpgrade and afterHooksRollback tell whether
// waitStrategy afterHooks applies to the action of obj; defaultStrategy is
// the controller-wide default for HelmReleases that leave it unset.
func afterHooksInstall(obj *v2.HelmRelease, defaultStrategy v2.HookWaitStrategy) bool {
	return obj.GetInstall().GetWaitStrategy(defaultStrategy) == v2.AfterHooks
}

func afterHooksUpgrade(obj *v2.HelmRelease, defaultStrategy v2.HookWaitStrategy) bool {
	return obj.GetUpgrade().GetWaitStrategy(defaultStrategy) == v2.AfterHooks
}

func afterHooksRollback(obj *v2.HelmRelease, defaultStrategy v2.HookWaitStrategy) bool {
	return obj.GetRollback().GetWaitStrategy(defaultStrategy) == v2.AfterHooks
}

// actionFunc runs one Helm action on cfg with o; it returns the release
// Helm returned (nil for rollback) and the action's error.
type actionFunc func(cfg *helmaction.Configuration, o action.Options) (*releasev1.Release, error)

// runAfterHooks runs an action with waitStrategy afterHooks: Helm runs it
// with the hook-only wait on storage wrapped by afterhooks.Wrap, which
// holds back the "deployed" record; then the release's resources are waited
// for and the held revision is committed (deployed) or failed.
//
// It returns the release as stored at the end: deployed on success, failed
// with an error naming what is not ready when the wait fails. When ctx ends
// during the wait the revision is left pending and ctx's error returned.
// When Helm itself fails nothing is held and Helm's result is returned.
func (h *helmRunner) runAfterHooks(ctx context.Context, verb string, wait action.Wait, run actionFunc) (*releasev1.Release, error) {
	raw := h.cfg.Releases.Driver
	callbacks := h.progress.helmCallbacks()
	wrapped, held := afterhooks.Wrap(raw, afterhooks.Target{Name: h.releaseName(), Timeout: wait.Timeout,
		OnHookStarted: func(p afterhooks.HookProgress) { callbacks.report(p.String()) }})
	cfg, err := action.WithDriver(h.cfg, wrapped)
	if err != nil {
		return nil, err
	}
	opts := h.opts
	opts.HookOnlyWait = true

	h.progress.report(fmt.Sprintf("running %s hooks and applying resources (afterHooks)", verb))
	h.event(nil, corev1.EventTypeNormal, AfterHooksStartedReason,
		fmt.Sprintf("Helm %s of %s started with waitStrategy afterHooks: pre-%s hooks, apply, post-%s hooks, then the readiness wait",
			verb, h.releaseName(), verb, verb))
	started := time.Now()
	rel, err := run(cfg, opts)
	callbacks.close()
	observePhase(verb, v2.AfterHooks, "helm", started)
	if err != nil {
		// Helm failed (it recorded the failure itself) or got no further
		// than validation; a cancelled action may leave the revision
		// pending, like a cancelled Helm wait does. A new revision that
		// cancelled Helm's own waits (the CRD wait) is a cancellation, as
		// under beforeHooks.
		return rel, h.newRevision.canceled(err)
	}
	if !held.Holding() {
		// Helm only logs a failed final storage write, so "success" can
		// come back with nothing held: no readiness wait ran, and the
		// revision in storage (if any) is not the one Helm reported.
		return rel, fmt.Errorf("Helm %s reported success but its final release record never reached storage, so the readiness wait did not run", verb)
	}

	target := held.Release()
	h.event(target, corev1.EventTypeNormal, AfterHooksWaitingReason,
		fmt.Sprintf("Post-%s hooks of %s.v%d completed; waiting up to %s for its resources to become ready (%s)",
			verb, target.Name, target.Version, wait.Timeout, wait.Strategy))

	timeout := time.Until(held.Deadline())
	if timeout <= 0 || timeout > wait.Timeout {
		timeout = wait.Timeout
	}
	return h.finishWait(ctx, cfg, raw, held, verb, wait, timeout)
}

// ResumeWait finishes the readiness wait of a revision that an earlier run
// of the controller left pending with the afterHooks marker (it stopped or
// lost leadership during the wait). No hook runs again: only the wait, for
// what is left of its deadline, then deployed or failed as usual.
func (h *helmRunner) ResumeWait(ctx context.Context, rel *releasev1.Release) (*releasev1.Release, error) {
	raw := h.cfg.Releases.Driver
	held, err := afterhooks.Recover(raw, h.releaseName())
	if err != nil {
		return nil, fmt.Errorf("afterHooks: recovering the pending revision %s.v%d: %w", rel.Name, rel.Version, err)
	}
	verb, wait := "install", action.InstallWait(h.obj, h.opts)
	switch rel.Info.Status {
	case common.StatusPendingUpgrade:
		verb, wait = "upgrade", action.UpgradeWait(h.obj, h.opts)
	case common.StatusPendingRollback:
		verb, wait = "rollback", action.RollbackWait(h.obj, h.opts)
	}
	timeout := afterhooks.ResumeTimeout(held.Deadline(), time.Now(), wait.Timeout)
	h.event(held.Release(), corev1.EventTypeNormal, AfterHooksWaitingReason,
		fmt.Sprintf("Resuming the readiness wait of %s.v%d after a restart; hooks are not run again; waiting up to %s (%s)",
			rel.Name, rel.Version, timeout.Round(time.Second), wait.Strategy))
	return h.finishWait(ctx, h.cfg, raw, held, verb, wait, timeout)
}

// finishWait waits for the resources of the held revision and records the
// outcome in storage: deployed when ready, failed with the list of what is
// not ready otherwise. When ctx ends during the wait the revision stays
// pending, with its deadline, for ResumeWait.
func (h *helmRunner) finishWait(ctx context.Context, cfg *helmaction.Configuration, raw driver.Driver, held *afterhooks.Held,
	verb string, wait action.Wait, timeout time.Duration) (*releasev1.Release, error) {
	target := held.Release()
	h.progress.report(waitingFor(target))
	started := time.Now()
	// The wait also ends when a new reconcile is queued
	// (CancelHealthCheckOnNewRevision); ctx ending means the controller
	// stops, which leaves the revision pending instead.
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	if h.opts.WaitContext != nil {
		stop := context.AfterFunc(h.opts.WaitContext, cancelWait)
		defer stop()
	}
	waitErr := afterhooks.WaitReady(waitCtx, cfg.KubeClient, target, wait.Strategy, wait.WaitForJobs, timeout,
		afterhooks.WithStatusReaders(h.opts.StatusReaders...))
	observePhase(verb, v2.AfterHooks, "readiness", started)
	if waitErr == nil {
		committed, err := held.Commit(ctx, raw)
		if err != nil {
			return nil, fmt.Errorf("afterHooks: resources of %s.v%d are ready but recording it failed: %w", target.Name, target.Version, err)
		}
		return committed, nil
	}
	if ctx.Err() != nil {
		// Interrupted, not failed: the revision stays pending with its
		// deadline in storage.
		return nil, waitErr
	}
	var canceled *reconcile.HealthCheckCanceledError
	if errors.As(h.newRevision.canceled(waitErr), &canceled) {
		// Abandoned for a new reconcile: failed, as Helm fails a revision
		// whose own wait is cancelled.
		failed, err := held.Fail(ctx, raw, fmt.Sprintf("readiness wait canceled: %s", canceled))
		if err != nil {
			return nil, errors.Join(canceled, fmt.Errorf("afterHooks: recording the failure of %s.v%d: %w", target.Name, target.Version, err))
		}
		return failed, canceled
	}
	failed, err := held.Fail(ctx, raw, waitErr.Error())
	if err != nil {
		return nil, errors.Join(waitErr, fmt.Errorf("afterHooks: recording the failure of %s.v%d: %w", target.Name, target.Version, err))
	}
	return failed, fmt.Errorf("readiness wait after post-%s hooks failed: %w", verb, waitErr)
}

// event emits an event about the HelmRelease carrying the chart version of
// rel as revision, as the state machine's events do.
func (h *helmRunner) event(rel *releasev1.Release, eventType, reason, msg string) {
	if h.recorder == nil {
		return
	}
	var meta map[string]string
	if rel != nil && rel.Chart != nil && rel.Chart.Metadata != nil && rel.Chart.Metadata.Version != "" {
		meta = map[string]string{helmv2.GroupVersion.Group + "/revision": rel.Chart.Metadata.Version}
	}
	h.recorder.AnnotatedEventf(h.obj, meta, eventType, reason, "%s", msg)
}
