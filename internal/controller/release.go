package controller

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/patch"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"helm.sh/helm/v4/pkg/release/common"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// Reasons for failures before any Helm action runs.
const (
	// InitFailedReason: values could not be composed or the Helm
	// configuration for the release could not be built.
	InitFailedReason = "InitFailed"
	// retriesExceededReason marks a release Stalled once its retries are used up.
	retriesExceededReason = "RetriesExceeded"
)

// reconcileRelease resolves chart and values and runs the release state
// machine.
func (r *HelmReleaseReconciler) reconcileRelease(ctx context.Context, patcher *patch.SerialPatcher, obj *v2.HelmRelease) (ctrl.Result, error) {
	conditions.MarkReconciling(obj, meta.ProgressingReason, "reconciliation in progress")
	if err := patcher.Patch(ctx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}); err != nil {
		return ctrl.Result{}, fmt.Errorf("failed to mark reconciliation in progress: %w", err)
	}

	if err := r.unsupportedFields(obj); err != nil {
		conditions.MarkStalled(obj, InitFailedReason, "%s", err)
		conditions.Delete(obj, meta.ReconcilingCondition)
		conditions.MarkFalse(obj, meta.ReadyCondition, InitFailedReason, "%s", err)
		r.EventRecorder.Event(obj, corev1.EventTypeWarning, InitFailedReason, err.Error())
		return ctrl.Result{}, nil
	}

	if obj.Spec.Chart != nil {
		if err := r.reconcileChartTemplate(ctx, obj); err != nil {
			return r.fail(obj, helmv2.ArtifactFailedReason, err)
		}
	} else if err := r.deleteChartTemplate(ctx, obj); err != nil {
		return r.fail(obj, helmv2.ArtifactFailedReason, err)
	}

	artifact, err := r.sourceArtifact(ctx, obj)
	if err != nil {
		return r.fail(obj, helmv2.ArtifactFailedReason, err)
	}
	chart, err := r.Charts.Get(ctx, client.ObjectKeyFromObject(obj), artifact)
	if err != nil {
		return r.fail(obj, helmv2.ArtifactFailedReason, fmt.Errorf("chart artifact %s: %w", artifact.Revision, err))
	}

	values, err := chartutil.ChartValuesFromReferences(ctx, ctrl.LoggerFrom(ctx), r.Client, obj.Namespace, obj.Upstream().GetValues(), obj.Spec.ValuesFrom...)
	if err != nil {
		return r.fail(obj, InitFailedReason, fmt.Errorf("could not compose values: %w", err))
	}

	progress := &progressReporter{ctx: ctx, obj: obj, patcher: patcher, owner: r.FieldManager}
	runner, err := r.newHelmRunner(ctx, obj, progress)
	if err != nil {
		return r.fail(obj, InitFailedReason, err)
	}
	obj.Status.StorageNamespace = obj.Upstream().GetStorageNamespace()

	req := &reconcile.Request{
		Object:                  obj,
		ReleaseName:             action.ReleaseName(obj),
		Chart:                   loadedChart{chart},
		Values:                  values,
		ConfigDigest:            chartutil.DigestValues(r.snapshotDigestAlgorithm(), values).String(),
		DigestAlgorithm:         r.snapshotDigestAlgorithm(),
		DefaultToRetryOnFailure: r.DefaultToRetryOnFailure,
	}
	if obj.Spec.ChartRef != nil && obj.Spec.ChartRef.Kind == sourcev1.OCIRepositoryKind && !r.DisableChartDigestTracking {
		version, ociDigest, err := ociChartVersion(chart.Metadata.Version, artifact.Revision)
		if err != nil {
			return r.fail(obj, helmv2.ArtifactFailedReason, err)
		}
		req.Chart, req.OCIDigest = versionedChart{loadedChart{chart}, version}, ociDigest
	}
	r.handleAnnotations(obj, req)

	machine := &reconcile.Machine{Helm: runner, Recorder: r.EventRecorder}
	runErr := machine.Run(ctx, req)
	// From here on the reconcile owns the object again; late progress
	// reports from Helm's goroutines are dropped.
	progress.close()
	r.updateInventory(ctx, runner, obj)
	return r.outcome(obj, runErr)
}

// newHelmRunner builds the Helm configuration of obj (storage and release
// namespaces) and the runner the state machine drives. progress may be nil.
func (r *HelmReleaseReconciler) newHelmRunner(ctx context.Context, obj *v2.HelmRelease, progress *progressReporter) (*helmRunner, error) {
	up := obj.Upstream()
	cfg, err := r.Helm.Build(up.GetStorageNamespace(), up.GetReleaseNamespace(), action.WithLogger(ctrl.LoggerFrom(ctx)))
	if err != nil {
		return nil, fmt.Errorf("could not build the Helm configuration: %w", err)
	}
	return &helmRunner{cfg: cfg, obj: obj, opts: r.ActionOptions, defaultWait: r.DefaultWaitStrategy,
		recorder: r.EventRecorder, progress: progress}, nil
}

// updateInventory records the objects of the release now in storage; a
// release that is gone leaves an empty inventory.
func (r *HelmReleaseReconciler) updateInventory(ctx context.Context, runner *helmRunner, obj *v2.HelmRelease) {
	rel, err := runner.LastRelease(ctx)
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
	inv, err := releaseInventory(rel, r.RESTMapper())
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
	switch {
	case err == nil:
		conditions.Delete(obj, meta.StalledCondition)
		// Spread the next runs (--interval-jitter-percentage), so releases
		// created together do not reconcile in lockstep forever.
		return jitter.JitteredRequeueInterval(ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}), nil
	case errors.Is(err, reconcile.ErrRetriesExhausted):
		// Nothing will change until the spec, the chart or the values do, or
		// a reset is requested; retrying on a backoff would only add noise.
		conditions.MarkStalled(obj, retriesExceededReason, "Failed to %s after %d attempt(s)",
			obj.Status.LastAttemptedReleaseAction, obj.Status.Failures)
		conditions.Delete(obj, meta.ReconcilingCondition)
		return ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}, nil
	case errors.As(err, &retry):
		return ctrl.Result{RequeueAfter: retry.After}, nil
	default:
		return ctrl.Result{}, err
	}
}

// fail reports a problem found before any Helm action: the release is left
// as it is.
func (r *HelmReleaseReconciler) fail(obj *v2.HelmRelease, reason string, err error) (ctrl.Result, error) {
	conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", err)
	r.EventRecorder.Event(obj, corev1.EventTypeWarning, reason, err.Error())
	if reason == helmv2.ArtifactFailedReason {
		// The source watch brings the HelmRelease back once the artifact
		// changes; until then the interval is soon enough.
		return ctrl.Result{RequeueAfter: obj.GetRequeueAfter()}, nil
	}
	return ctrl.Result{}, err
}
