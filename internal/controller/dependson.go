package controller

import (
	"context"
	"errors"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// invalidDependencyReason marks a spec.dependsOn that cannot work as
// written; waiting does not help, so the object is Stalled. A readyExpr
// that does not compile gets upstream's InvalidCELExpression instead. A
// Warning event with this reason names a dependency that is checked,
// though not as the controller's settings suggest.
const invalidDependencyReason = "InvalidDependency"

// waitForDependencies holds the release back while a HelmRelease it depends
// on is not ready. It returns true when the reconcile must stop here, with
// errWaiting while it waits for its dependencies, or nil when the
// dependencies are invalid: as upstream's terminal error, that is a
// finished reconcile of the generation, so kstatus reads the Stalled
// condition.
func (r *HelmReleaseReconciler) waitForDependencies(ctx context.Context, obj *v2.HelmRelease) (ctrl.Result, bool, error) {
	var err error
	if len(obj.Spec.DependsOn) > 0 {
		var warnings []string
		err = checkDependencies(ctx, dependencyReader{cache: r.Client, api: r.APIReader}, obj, dependencyOptions{
			NoCrossNamespaceRefs: r.NoCrossNamespaceRef,
			AdditiveCEL:          r.AdditiveCELDependencyCheck,
			Warn:                 func(msg string) { warnings = append(warnings, msg) },
		})
		r.warnSpec(ctx, obj, invalidDependencyReason, warnings)
	}
	if err == nil {
		clearPassedCheck(obj, helmv2.DependencyNotReadyReason, invalidDependencyReason, meta.InvalidCELExpressionReason)
		return ctrl.Result{}, false, nil
	}

	var invalid *InvalidDependencyError
	if errors.As(err, &invalid) {
		reason := invalidDependencyReason
		if invalid.InvalidCEL {
			// Upstream's reason: alerts on invalid CEL expressions
			// (healthCheckExprs and readyExpr alike) key on it.
			reason = meta.InvalidCELExpressionReason
		}
		conditions.MarkStalled(obj, reason, "%s", err)
		conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", err)
		conditions.Delete(obj, meta.ReconcilingCondition)
		r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, helmv2.ActionCheckDependencies.String(), "%s", err)
		return ctrl.Result{}, true, ctrlreconcile.TerminalError(err)
	}

	conditions.MarkFalse(obj, meta.ReadyCondition, helmv2.DependencyNotReadyReason, "%s", err)
	// Upstream's wording; Ready carries the dependencies' state.
	conditions.MarkReconciling(obj, meta.ProgressingReason, "Fulfilling prerequisites")
	ctrl.LoggerFrom(ctx).Info("dependencies not ready, retrying later", "error", err.Error(), "after", r.RequeueDependency)
	r.EventRecorder.Eventf(obj, nil, corev1.EventTypeNormal, helmv2.DependencyNotReadyReason, helmv2.ActionCheckDependencies.String(), "%s", err)
	return ctrl.Result{RequeueAfter: r.RequeueDependency}, true, errWaiting
}
