package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/drift"
	"github.com/afterhooks/helm-controller/internal/healthcheck"
	"github.com/afterhooks/helm-controller/internal/postrender"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/redact"
	"github.com/afterhooks/helm-controller/internal/runner"
)

// Reasons for failures before any Helm action runs.
const (
	// FactoryErrorReason: the Helm configuration for the release could not
	// be built (upstream's reason).
	FactoryErrorReason = "FactoryError"
	// ValuesErrorReason: spec.values and spec.valuesFrom could not be
	// composed (upstream's reason).
	ValuesErrorReason = "ValuesError"
	// retriesExceededReason marks a release Stalled once its retries are used up.
	retriesExceededReason = "RetriesExceeded"
	// missingRollbackTargetReason: a failed upgrade's rollback
	// remediation found no successful release to roll back to.
	missingRollbackTargetReason = "MissingRollbackTarget"
)

// reconcileRelease resolves chart and values and runs the release state
// machine.
func (r *HelmReleaseReconciler) reconcileRelease(ctx context.Context, patcher *releasePatcher, obj *v2.HelmRelease) (ctrl.Result, error) {
	progress := &progressReporter{ctx: ctx, obj: obj, patcher: patcher, owner: r.FieldManager, redactions: r.Redactions}
	if err := r.markInProgress(ctx, patcher, obj, progress); err != nil {
		return ctrl.Result{}, err
	}

	driftIgnore, healthChecks, invalid := r.checkSpec(ctx, obj)
	if invalid != nil {
		return r.stallOnInvalidSpec(obj, invalid.action, invalid.reason, invalid.err)
	}

	if err := r.syncChartTemplate(ctx, obj); err != nil {
		return r.fail(obj, helmv2.ActionResolveSource, helmv2.ArtifactFailedReason, err)
	}

	artifact, err := r.sourceArtifact(ctx, obj)
	if notReady := (*sourceNotReadyError)(nil); errors.As(err, &notReady) {
		return r.waitForSource(ctx, obj, notReady)
	}
	if err != nil {
		return r.fail(obj, helmv2.ActionResolveSource, helmv2.ArtifactFailedReason, err)
	}
	if !r.Charts.Current(client.ObjectKeyFromObject(obj), artifact) {
		progress.begin()
	}
	chart, err := r.Charts.Get(ctx, client.ObjectKeyFromObject(obj), artifact)
	if err != nil {
		return r.downloadFailed(ctx, obj, fmt.Errorf("chart artifact %s: %w", artifact.Revision, err))
	}
	clearPassedCheck(obj, helmv2.ArtifactFailedReason, SourceNotReadyReason)

	values, err := r.composeValues(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	clearPassedCheck(obj, ValuesErrorReason)
	if reason := reconcile.TargetChanged(obj, chart.Metadata.Name); reason != "" {
		progress.begin()
		return r.uninstallPreviousTarget(ctx, obj, reason)
	}

	req, err := r.newReleaseRequest(obj, chart, artifact, values)
	if err != nil {
		return r.fail(obj, helmv2.ActionResolveSource, ChartMutateErrorReason, err)
	}

	newRevision := r.watchForNewRevision(ctx, obj, artifact)
	defer newRevision.Stop()
	runner, err := r.newHelmRunner(ctx, obj, runnerExtras{progress: progress, driftIgnore: driftIgnore,
		healthChecks: healthChecks, newRevision: newRevision})
	if err != nil {
		reason := FactoryErrorReason
		if errors.As(err, new(*targetError)) {
			reason = RESTClientErrorReason
		}
		return r.fail(obj, helmv2.ActionReconcile, reason, err)
	}
	obj.Status.StorageNamespace = obj.GetStorageNamespace()
	if r.answerPlanRequest(ctx, obj, runner, chart, values) {
		progress.close()
		return jitter.JitteredRequeueInterval(ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}), nil
	}
	r.handleAnnotations(obj, req)

	machine := &reconcile.Machine{Helm: runner, Recorder: runner.RecorderWithLogs(r.EventRecorder),
		Progress: progress.Report, BeforeChange: progress.begin}
	runErr := machine.Run(ctx, req)
	// From here on the reconcile owns the object again; late progress
	// reports from Helm's goroutines are dropped.
	progress.close()
	r.updateInventory(ctx, runner, obj)
	return r.outcome(obj, runErr)
}

// markInProgress marks obj Reconciling, as upstream marks the start of
// every reconcile, and writes that at once, unless the last reconcile of
// this generation succeeded. A reconcile from there is most often a check
// that finds the release in sync (its interval, a requestedAt), and then
// writes its status once, at its end, or not at all when nothing in it
// changed; the mark is written later, by progress.begin, as soon as the
// reconcile does more than check: before a chart download or anything
// that changes the release.
func (r *HelmReleaseReconciler) markInProgress(ctx context.Context, patcher *releasePatcher, obj *v2.HelmRelease, progress *progressReporter) error {
	settled := obj.Status.ObservedGeneration == obj.Generation && conditions.IsReady(obj) &&
		!conditions.Has(obj, meta.ReconcilingCondition) && !conditions.Has(obj, meta.StalledCondition)
	// Upstream's wording, which `flux get hr` shows.
	conditions.MarkReconciling(obj, meta.ProgressingReason, "Fulfilling prerequisites")
	if settled {
		progress.deferred = true
		return nil
	}
	redactConditions(obj, r.Redactions)
	if err := patcher.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}); err != nil {
		return fmt.Errorf("failed to mark reconciliation in progress: %w", err)
	}
	return nil
}

// invalidSpec is a setting of the spec that stops the reconcile before
// anything else happens: the step it stops and why.
type invalidSpec struct {
	action helmv2.Action
	reason string
	err    error
}

// checkSpec checks the settings of obj's spec that are read before any
// chart is downloaded, and returns the drift ignore rules and the compiled
// health checks, or the setting that stops the reconcile.
//
// Settings are refused before anything else happens only where
// upstream stops too, so a typo does not cost a chart download, let
// alone a Helm action. Where this controller checks more than upstream
// does, it warns and goes on as upstream would (see docs/invalid-spec.md).
func (r *HelmReleaseReconciler) checkSpec(ctx context.Context, obj *v2.HelmRelease) (drift.Rules, healthcheck.Readers, *invalidSpec) {
	driftIgnore, warnings := driftIgnoreRules(obj)
	r.warnSpec(ctx, obj, InvalidDriftDetectionReason, warnings)
	r.warnSpec(ctx, obj, InvalidHealthCheckExprsReason, healthcheck.Warnings(obj.Spec.HealthCheckExprs))
	healthChecks, err := healthcheck.Compile(obj.Spec.HealthCheckExprs)
	if err != nil {
		return drift.Rules{}, nil, &invalidSpec{action: helmv2.ActionHealthCheck, reason: meta.InvalidCELExpressionReason, err: err}
	}
	// Post renderers kustomize refuses whatever the chart renders would
	// fail every install and upgrade the same way; the actions build them
	// again when they run.
	refused, warnings := postrender.Check(&obj.Spec.HelmReleaseSpec)
	r.warnSpec(ctx, obj, InvalidPostRenderersReason, warnings)
	if refused != nil {
		return drift.Rules{}, nil, &invalidSpec{action: helmv2.ActionReconcile, reason: InvalidPostRenderersReason, err: refused}
	}
	clearPassedCheck(obj, InvalidDriftDetectionReason, meta.InvalidCELExpressionReason, InvalidPostRenderersReason)
	return driftIgnore, healthChecks, nil
}

// syncChartTemplate makes the HelmChart of obj's chart template match the
// spec, or deletes the one a removed chart template left.
func (r *HelmReleaseReconciler) syncChartTemplate(ctx context.Context, obj *v2.HelmRelease) error {
	if obj.Spec.Chart != nil {
		return r.reconcileChartTemplate(ctx, obj)
	}
	return r.deleteChartTemplate(ctx, obj)
}

// waitForSource reports a source that is not ready yet and looks at it
// again later.
func (r *HelmReleaseReconciler) waitForSource(ctx context.Context, obj *v2.HelmRelease, notReady *sourceNotReadyError) (ctrl.Result, error) {
	// As upstream: no event, and a recheck at --requeue-dependency. The
	// source watch only fires on a new artifact, which a failing source
	// never gets, so without the recheck Ready would keep the first,
	// vague reason instead of the source's own failure.
	ctrl.LoggerFrom(ctx).Info(notReady.Error())
	if notReady.sourceFailed && !hasReadyFalse(obj, SourceNotReadyReason, notReady.msg) {
		// Unlike upstream, a failure the source reports (a missing
		// chart version or repository) is announced once, so alerts
		// see it; a source that just has not got to it yet is not.
		r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, SourceNotReadyReason, helmv2.ActionResolveSource.String(), "%s", notReady.msg)
	}
	conditions.MarkFalse(obj, meta.ReadyCondition, SourceNotReadyReason, "%s", notReady)
	recheck := r.RequeueDependency
	if recheck <= 0 {
		recheck = obj.GetRequeueAfter()
	}
	return jitter.JitteredRequeueInterval(ctrl.Result{RequeueAfter: recheck}), errWaiting
}

// newReleaseRequest is what the state machine is asked to bring the
// release to: chart and values, with the OCI artifact's digest when the
// chart comes from an OCIRepository. An error means the chart could not
// be adjusted to the artifact's revision.
func (r *HelmReleaseReconciler) newReleaseRequest(obj *v2.HelmRelease, chart *chartsource.Chart, artifact *meta.Artifact, values map[string]any) (*reconcile.Request, error) {
	req := &reconcile.Request{
		Object:                  obj,
		ReleaseName:             v2.ReleaseName(obj),
		Chart:                   loadedChart{chart},
		Values:                  values,
		ConfigDigest:            chartutil.DigestValues(r.snapshotDigestAlgorithm(), values).String(),
		DigestAlgorithm:         r.snapshotDigestAlgorithm(),
		DefaultToRetryOnFailure: r.DefaultToRetryOnFailure,
	}
	if chartsource.PinnedToArtifactDigest(sourceKind(obj), artifact.Revision) {
		if err := r.applyOCIRevision(req, chart, artifact.Revision); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// newHelmRunner builds the Helm configuration of obj (storage and release
// namespaces) on obj's target cluster and identity (spec.kubeConfig,
// spec.serviceAccountName, --default-service-account) and the runner the
// state machine drives. Everything the runner does, and everything that
// asks it for its REST config or mapper, reaches that target. The runner
// is complete when returned; extras may be zero. A target that cannot be
// built is a *targetError.
func (r *HelmReleaseReconciler) newHelmRunner(ctx context.Context, obj *v2.HelmRelease, extras runnerExtras) (*runner.Runner, error) {
	target, err := r.Targets.Build(ctx, connect.Request{
		Kind:               helmv2.HelmReleaseKind,
		Namespace:          obj.Namespace,
		Name:               obj.Name,
		ReleaseNamespace:   obj.GetReleaseNamespace(),
		KubeConfig:         obj.Spec.KubeConfig,
		ServiceAccountName: obj.Spec.ServiceAccountName,
		Persistent:         obj.UsePersistentClient(),
	})
	if err != nil {
		return nil, &targetError{err: err}
	}
	factory := r.Helm
	if !target.Shared() {
		if factory, err = r.Helm.ForGetter(target.Getter); err != nil {
			return nil, &targetError{err: fmt.Errorf("connecting to %s: %w", target.Cluster, err)}
		}
	}
	settings := runner.Settings{Config: r.ActionConfig, Recreations: r.Recreations, DefaultHookOrder: r.DefaultHookOrder,
		Recorder: r.EventRecorder, OverrideManagers: r.OverrideManagers,
		Logger: logr.ToSlogHandler(ctrl.LoggerFrom(ctx)), DriftIgnore: extras.driftIgnore, HealthChecks: extras.healthChecks}
	// Absent extras stay nil interfaces: the runner tells them apart.
	if extras.progress != nil {
		settings.Progress = extras.progress
	}
	if extras.newRevision != nil {
		settings.NewRevision = extras.newRevision
	}
	return runner.New(factory, target, obj, settings)
}

// runnerExtras is what a runner for a full reconcile uses beyond the
// target: all optional (an uninstall needs none of it).
type runnerExtras struct {
	// progress reports afterHooks phases in the Reconciling condition.
	progress *progressReporter
	// driftIgnore are the converted spec.driftDetection ignore rules.
	driftIgnore drift.Rules
	// healthChecks builds the readers of spec.healthCheckExprs.
	healthChecks healthcheck.Readers
	// newRevision abandons readiness waits for a new revision
	// (CancelHealthCheckOnNewRevision).
	newRevision *newRevisionWatch
}

// uninstallRunner returns the runner that uninstalls the release of a
// HelmRelease being deleted, or nil when the uninstall is skipped, as
// upstream skips it: nothing was ever released (no storage namespace in the
// status), the kubeconfig Secret or ConfigMap is gone, or the impersonated
// ServiceAccount is gone from the controller's cluster (its namespace is
// being deleted, say). Without those the release cannot be reached as the
// user configured it, and retrying would block the deletion forever; the
// release's objects are left behind and the log says so. Any other failure
// is returned, with Ready=False, and the deletion is retried.
func (r *HelmReleaseReconciler) uninstallRunner(ctx context.Context, obj *v2.HelmRelease) (*runner.Runner, error) {
	log := ctrl.LoggerFrom(ctx)
	if obj.Status.StorageNamespace == "" {
		log.Info("skipping the Helm uninstall: the HelmRelease never got as far as a release (no storage namespace in its status)")
		return nil, nil
	}
	// The release to remove is the one the status records, even when the
	// spec has since been changed to name another.
	helm, err := r.newHelmRunner(ctx, reconcile.PreviousTarget(obj), runnerExtras{})
	switch {
	case apierrors.IsNotFound(err):
		log.Error(err, "skipping the Helm uninstall: the kubeconfig of the release is gone; its objects are left in place")
		return nil, nil
	case err != nil:
		conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.UninstallFailedReason, "could not uninstall: %s", err)
		r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, helmv2.UninstallFailedReason, helmv2.ActionHelmUninstall.String(), "could not uninstall: %s", err)
		return nil, fmt.Errorf("uninstalling: %w", err)
	}
	if sa := helm.Target().ServiceAccount; sa != "" && !helm.Target().Remote {
		key := client.ObjectKey{Namespace: obj.Namespace, Name: sa}
		switch err := r.APIReader.Get(ctx, key, &corev1.ServiceAccount{}); {
		case apierrors.IsNotFound(err):
			log.Error(err, "skipping the Helm uninstall: the impersonated ServiceAccount is gone; the release's objects are left in place", "serviceAccount", key.String())
			return nil, nil
		case err != nil:
			conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.UninstallFailedReason,
				"could not confirm ServiceAccount '%s' exists to uninstall as it: %s", key, err)
			return nil, fmt.Errorf("uninstalling: reading ServiceAccount '%s': %w", key, err)
		}
	}
	return helm, nil
}

// RESTClientErrorReason: the cluster connection of the release (remote
// kubeconfig, impersonation) could not be built; nothing was run.
const RESTClientErrorReason = "RESTClientError"

// targetError is a failure to build a release's cluster connection.
type targetError struct{ err error }

func (e *targetError) Error() string { return e.err.Error() }
func (e *targetError) Unwrap() error { return e.err }

// updateInventory records the objects of the release now in storage; a
// release that is gone leaves an empty inventory.
func (r *HelmReleaseReconciler) updateInventory(ctx context.Context, helm *runner.Runner, obj *v2.HelmRelease) {
	rel, err := helm.LastRelease(ctx)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		obj.Status.Inventory = nil
		return
	case err != nil:
		ctrl.LoggerFrom(ctx).Error(err, "reading the release for the inventory")
		return
	case rel.Info != nil && rel.Info.Status == common.StatusUninstalled:
		obj.Status.Inventory = nil
		return
	}
	// The release's objects live on its target cluster: only that
	// cluster's mapper knows which of its kinds are namespaced.
	mapper, err := helm.RESTMapper()
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "building the inventory: REST mapper of the target cluster")
		return
	}
	inv, err := r.inventories.of(client.ObjectKeyFromObject(obj), rel, mapper)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "building the inventory")
		return
	}
	obj.Status.Inventory = inv
}

// handleAnnotations acts on the reset and force request annotations; each
// token is handled once.
func (r *HelmReleaseReconciler) handleAnnotations(obj *v2.HelmRelease, req *reconcile.Request) {
	up := obj.Upstream()
	if helmv2.ShouldHandleResetRequest(up) {
		obj.Status.ClearFailures()
	}
	obj.Status.LastHandledResetAt = up.Status.LastHandledResetAt
	if helmv2.ShouldHandleForceRequest(up) {
		req.Force = true
	}
	obj.Status.LastHandledForceAt = up.Status.LastHandledForceAt
}

// outcome turns the state machine's result into conditions and a requeue.
func (r *HelmReleaseReconciler) outcome(obj *v2.HelmRelease, err error) (ctrl.Result, error) {
	var retry *reconcile.RetryAfterError
	var canceled *reconcile.HealthCheckCanceledError
	switch {
	case err == nil:
		conditions.Delete(obj, meta.StalledCondition)
		// Spread the next runs (--interval-jitter-percentage), so releases
		// created together do not reconcile in lockstep forever.
		return jitter.JitteredRequeueInterval(ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}), nil
	case errors.Is(err, reconcile.ErrRetriesExhausted):
		// Nothing will change until the spec, the chart or the values do, or
		// a reset is requested, and each of those brings the release back
		// through a watch. As upstream, the release is not looked at again
		// before: a requeue at the interval only marked it Reconciling and
		// Stalled again, two writes for nothing.
		conditions.MarkStalled(obj, retriesExceededReason, "Failed to %s after %d attempt(s)",
			obj.Status.LastAttemptedReleaseAction, attempts(obj))
		conditions.Delete(obj, meta.ReconcilingCondition)
		return ctrl.Result{}, ctrlreconcile.TerminalError(err)
	case errors.Is(err, reconcile.ErrMissingRollbackTarget):
		// As upstream: the failed upgrade has nothing to roll back to,
		// and nothing will until the spec, the chart or the values change.
		conditions.MarkStalled(obj, missingRollbackTargetReason, "Failed to perform remediation: %s", err)
		conditions.Delete(obj, meta.ReconcilingCondition)
		return ctrl.Result{}, ctrlreconcile.TerminalError(err)
	case errors.Is(err, reconcile.ErrChartCannotApply):
		// Rendering this chart again fails the same way; the chart's
		// change (a new artifact) or the spec's brings the release back.
		conditions.MarkStalled(obj, conditions.GetReason(obj, meta.ReadyCondition), "%s", conditions.GetMessage(obj, meta.ReadyCondition))
		conditions.Delete(obj, meta.ReconcilingCondition)
		return ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}, nil
	case errors.As(err, &retry):
		markRetrying(obj)
		return ctrl.Result{RequeueAfter: retry.After}, nil
	case errors.As(err, new(*reconcile.RemediatedError)):
		// As upstream: the remediation succeeded and a retry follows,
		// rate limited like a failure, but not reported as a reconcile
		// error (log line, controller_runtime_reconcile_errors_total);
		// nor is the generation observed yet.
		markRetrying(obj)
		return ctrl.Result{Requeue: true}, errWaiting
	case errors.As(err, &canceled):
		// The change that cancelled the wait has queued a new reconcile
		// already; the short requeue only guards against missing it.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	default:
		markRetrying(obj)
		return ctrl.Result{}, err
	}
}

// markRetrying shows a failure that will be retried as upstream does:
// Reconciling True with reason ProgressingWithRetry and Ready's message;
// the next reconcile marks it Progressing again. Ready is False, or
// Unknown after a drift correction that failed.
func markRetrying(obj *v2.HelmRelease) {
	if !conditions.IsTrue(obj, meta.ReadyCondition) {
		conditions.MarkReconciling(obj, meta.ProgressingWithRetryReason, "%s", conditions.GetMessage(obj, meta.ReadyCondition))
	}
}

// composeValues merges spec.valuesFrom and spec.values. A failure is
// reported as upstream reports it: Ready=False ValuesError with the
// resolver's message and a Warning event; nothing else has happened.
func (r *HelmReleaseReconciler) composeValues(ctx context.Context, obj *v2.HelmRelease) (map[string]any, error) {
	// The Secrets read are remembered before anything can fail: a failure
	// to merge a value is the first message that may quote it.
	secrets := &redact.Reader{Client: r.Client}
	values, err := chartutil.ChartValuesFromReferences(ctx, ctrl.LoggerFrom(ctx), secrets, obj.Namespace, obj.GetValues(), obj.Spec.ValuesFrom...)
	r.Redactions.Set(client.ObjectKeyFromObject(obj), secrets.ForRelease(obj))
	if err != nil {
		_, err = r.fail(obj, helmv2.ActionResolveValues, ValuesErrorReason, err)
		return nil, err
	}
	return values, nil
}

// InvalidPostRenderersReason: spec.postRenderers cannot be built (a patch
// that is not an object or a list of operations, a bad target selector),
// or, in a Warning event only, holds an entry that fails on the objects it
// selects.
const InvalidPostRenderersReason = "InvalidPostRenderers"

// InvalidHealthCheckExprsReason: a Warning event about a
// spec.healthCheckExprs entry that upstream accepts but that does not do
// what it reads as (an apiVersion that is not group/version).
const InvalidHealthCheckExprsReason = "InvalidHealthCheckExprs"

// warnSpec announces spec settings that upstream accepts but that do not
// do what they read as; the reconcile goes on as upstream's would. The
// Warning event goes out while the generation is not reconciled yet, so
// a release that is otherwise fine does not repeat it every interval;
// the log says it on every reconcile.
func (r *HelmReleaseReconciler) warnSpec(ctx context.Context, obj *v2.HelmRelease, reason string, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	msg := strings.Join(warnings, "\n")
	ctrl.LoggerFrom(ctx).Info("spec setting not used as written", "reason", reason, "warning", msg)
	if obj.Status.ObservedGeneration == obj.Generation {
		return
	}
	r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, helmv2.ActionReconcile.String(), "%s", msg)
}

// stallOnInvalidSpec reports a spec setting that cannot be honoured. No
// Helm action has run: the release stays as it is until the spec changes,
// so retrying would only repeat the message.
func (r *HelmReleaseReconciler) stallOnInvalidSpec(obj *v2.HelmRelease, action helmv2.Action, reason string, err error) (ctrl.Result, error) {
	msg := fmt.Sprintf("Reconciliation stopped until the spec changes: %s; the release is left untouched", err)
	conditions.MarkStalled(obj, reason, "%s", msg)
	conditions.Delete(obj, meta.ReconcilingCondition)
	conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", msg)
	r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, action.String(), "%s", msg)
	return ctrl.Result{}, ctrlreconcile.TerminalError(err)
}

// fail reports a problem found before any Helm action, in the step action
// names: the release is left as it is.
func (r *HelmReleaseReconciler) fail(obj *v2.HelmRelease, action helmv2.Action, reason string, err error) (ctrl.Result, error) {
	conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", err)
	if reason == helmv2.ArtifactFailedReason && transientAPIError(err) {
		// The API server could not answer for a moment: no bad input to
		// announce, and no watch would bring the HelmRelease back sooner
		// than the interval. As upstream, it is retried with backoff.
		return ctrl.Result{}, err
	}
	r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, action.String(), "%s", err)
	if reason == helmv2.ArtifactFailedReason {
		// The source watch brings the HelmRelease back once the artifact
		// changes; until then the interval is soon enough. The
		// generation is not reconciled yet, as upstream has it.
		return ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}, errWaiting
	}
	return ctrl.Result{}, err
}

// downloadFailed reports a chart artifact that could not be downloaded,
// as upstream does: Ready=False/ArtifactFailed, the generation not
// reconciled, and nothing done to the release. An artifact that is gone
// (404: garbage collected once a newer one was stored) is looked at again
// after --requeue-dependency, by when the source points at its new
// artifact. Any other failure (the artifact server restarting or
// overloaded, a connection cut or stalled mid-body) is returned, so that
// the reconcile is retried with backoff: waiting for the interval would
// leave the release behind long after the server is back, since a healthy
// source gets no new artifact to bring the HelmRelease back sooner.
func (r *HelmReleaseReconciler) downloadFailed(ctx context.Context, obj *v2.HelmRelease, err error) (ctrl.Result, error) {
	if errors.Is(err, chartsource.ErrNotFound) {
		recheck := r.RequeueDependency
		if recheck <= 0 {
			recheck = obj.GetRequeueAfter()
		}
		msg := fmt.Sprintf("%s (artifact not found); retrying in %s", err, recheck)
		ctrl.LoggerFrom(ctx).Info(msg)
		conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.ArtifactFailedReason, "%s", msg)
		return ctrl.Result{RequeueAfter: recheck}, errWaiting
	}
	conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.ArtifactFailedReason, "%s", err)
	r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, helmv2.ArtifactFailedReason, helmv2.ActionResolveSource.String(), "%s", err)
	return ctrl.Result{}, err
}

// clearPassedCheck turns a Ready=False left by a check that has now passed
// into Unknown, as upstream marks a met prerequisite: the old cause is no
// longer true, and this attempt's outcome is not known yet. (Stalled needs
// no such care: marking the reconcile in progress removes it.)
func clearPassedCheck(obj *v2.HelmRelease, reasons ...string) {
	if conditions.HasAnyReason(obj, meta.ReadyCondition, reasons...) {
		conditions.MarkUnknown(obj, meta.ReadyCondition, meta.ProgressingReason, "reconciliation in progress")
	}
}

// hasReadyFalse tells whether obj already reads Ready=False with reason
// and message.
func hasReadyFalse(obj *v2.HelmRelease, reason, msg string) bool {
	c := conditions.Get(obj, meta.ReadyCondition)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason && c.Message == msg
}

// attempts is how often the last attempted action failed, as its
// remediation counts it (upstream's figure in the Stalled message).
func attempts(obj *v2.HelmRelease) int64 {
	if rem := obj.GetActiveRemediation(); rem != nil {
		return obj.FailureCount(rem)
	}
	return obj.Status.Failures
}

// transientAPIError tells whether err is the API server (or the way to it)
// failing for a moment rather than a request it refuses: a timeout, too many
// requests, an internal or unavailable server, a conflict, or a connection
// that failed.
func transientAPIError(err error) bool {
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err),
		apierrors.IsConflict(err):
		return true
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}
