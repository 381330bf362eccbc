package controller

import (
	"fmt"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/healthcheck"
)

// healthCheckReaders builds the status readers of compiled
// spec.healthCheckExprs on the REST mapper Helm's configurations share; nil
// when there are no expressions.
func (r *HelmReleaseReconciler) healthCheckReaders(build healthcheck.Readers) ([]engine.StatusReader, error) {
	if build == nil {
		return nil, nil
	}
	mapper, err := r.Helm.RESTClientGetter().ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("REST mapper for healthCheckExprs: %w", err)
	}
	return build(mapper), nil
}

// stallOnInvalidHealthChecks reports expressions that do not compile. No
// Helm action has run: the release stays as it is until the spec changes,
// so retrying would only repeat the message.
func (r *HelmReleaseReconciler) stallOnInvalidHealthChecks(obj *v2.HelmRelease, err error) (ctrl.Result, error) {
	msg := fmt.Sprintf("Reconciliation stopped until the spec changes: %s; the release is left untouched", err)
	conditions.MarkStalled(obj, meta.InvalidCELExpressionReason, "%s", msg)
	conditions.Delete(obj, meta.ReconcilingCondition)
	conditions.MarkFalse(obj, meta.ReadyCondition, meta.InvalidCELExpressionReason, "%s", msg)
	r.EventRecorder.Event(obj, corev1.EventTypeWarning, meta.InvalidCELExpressionReason, msg)
	return ctrl.Result{}, nil
}
