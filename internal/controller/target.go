package controller

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// uninstallPreviousTarget uninstalls the release the status records before
// a release is made at the target the spec now names, as upstream does: the
// old release would otherwise be left behind, and its objects would block
// the new one. The status then starts afresh and the reconcile is requeued.
func (r *HelmReleaseReconciler) uninstallPreviousTarget(ctx context.Context, obj *v2.HelmRelease, reason string) (ctrl.Result, error) {
	ctrl.LoggerFrom(ctx).Info(fmt.Sprintf("release target configuration changed (%s): uninstalling the current release", reason))
	runner, err := r.newHelmRunner(ctx, reconcile.PreviousTarget(obj), runnerExtras{})
	if err != nil {
		return r.fail(obj, helmv2.ActionReconcile, RESTClientErrorReason, err)
	}
	machine := &reconcile.Machine{Helm: runner, Recorder: runner.RecorderWithLogs(r.EventRecorder)}
	if err := machine.Uninstall(ctx, &reconcile.Request{Object: obj}); err != nil {
		return ctrl.Result{}, err
	}
	obj.Status.ClearHistory()
	obj.Status.ClearFailures()
	obj.Status.StorageNamespace = ""
	return ctrl.Result{Requeue: true}, nil
}
