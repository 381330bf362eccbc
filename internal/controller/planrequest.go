package controller

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/runner"
)

// PlanRequestAnnotation asks the controller for a plan of what the next
// reconcile of the HelmRelease would do, computed by internal/preview as
// `helm-controller plan` computes it, without acting on the release. Its
// value is a token, recorded in status.lastHandledPlanAt once handled. A
// controller that does not know it ignores it.
const PlanRequestAnnotation = "helm.toolkit.fluxcd.io/planRequestedAt"

// Reasons and action of the plan's events.
const (
	PlannedReason    = "Planned"
	PlanFailedReason = "PlanFailed"
	planEventAction  = "plan"
)

// maxPlanEventLength bounds the plan an event carries. Core v1 events
// (the recorder's default API) have no note limit, but notification
// providers and `kubectl describe` do not do well with large messages;
// a plan longer than this is cut, with a note pointing at the command.
const maxPlanEventLength = 8 * 1024

// planTruncated ends an event whose plan was cut.
const planTruncated = "\n… (truncated; `helm-controller plan` prints the plan whole)"

// pendingPlanRequest returns the token of a plan request not handled yet.
func pendingPlanRequest(obj *v2.HelmRelease) (string, bool) {
	token, ok := obj.GetAnnotations()[PlanRequestAnnotation]
	return token, ok && token != "" && token != obj.Status.LastHandledPlanAt
}

// actionRequested tells whether anything besides a plan request asks this
// reconcile to act: a generation not reconciled yet, or a
// reconcile.fluxcd.io/requestedAt not handled yet.
func actionRequested(obj *v2.HelmRelease) bool {
	if obj.Status.ObservedGeneration != obj.Generation {
		return true
	}
	token, ok := meta.ReconcileAnnotationValue(obj.GetAnnotations())
	return ok && token != obj.Status.LastHandledReconcileAt
}

// answerPlanRequest computes the plan a pending plan request asks for,
// writes its summary to status.lastPlan and the plan in full to an
// event, and records the token. It returns true when the reconcile must
// end there, without acting (endsWithPlan). A plan that fails is
// reported the same way (a failed summary, a Warning event) and touches
// no condition.
func (r *HelmReleaseReconciler) answerPlanRequest(ctx context.Context, obj *v2.HelmRelease, helm *runner.Runner,
	chart *chartsource.Chart, values map[string]any) bool {
	token, ok := pendingPlanRequest(obj)
	if !ok {
		return false
	}
	status := &v2.PlanStatus{RequestedAt: token, Time: metav1.Now()}
	pv, err := r.computePlan(ctx, obj, helm, chart, values)
	if err != nil {
		status.Failed, status.Summary = true, "plan failed: "+err.Error()
		r.EventRecorder.Eventf(obj, nil, corev1.EventTypeWarning, PlanFailedReason, planEventAction, "%s", status.Summary)
	} else {
		status.Action, status.Summary = string(pv.Step), pv.Summary()
		var text strings.Builder
		if err := preview.WriteText(&text, pv, false); err != nil {
			text.WriteString(status.Summary)
		}
		r.EventRecorder.Eventf(obj, nil, corev1.EventTypeNormal, PlannedReason, planEventAction, "%s", planEventText(text.String()))
	}
	obj.Status.LastPlan, obj.Status.LastHandledPlanAt = status, token
	return endsWithPlan(obj, pv, err)
}

// endsWithPlan tells whether a reconcile that answered a plan request
// ends there: only when nothing else asked for it (a generation not
// reconciled yet, a requestedAt not handled yet) and the plan found
// nothing to do, or could not be computed. A plan that predicts an
// action (a new chart artifact, changed valuesFrom, a failed release to
// retry) is the reconcile's own work, which the plan request must not
// put off to the next interval: the reconcile goes on and does it.
func endsWithPlan(obj *v2.HelmRelease, pv *preview.Preview, planErr error) bool {
	if actionRequested(obj) {
		return false
	}
	return planErr != nil || pv == nil || !pv.Changes()
}

// computePlan previews the next reconcile of obj over the runner the
// reconcile would act with, on a chart of its own (a dry run may change
// it).
func (r *HelmReleaseReconciler) computePlan(ctx context.Context, obj *v2.HelmRelease, helm *runner.Runner,
	chart *chartsource.Chart, values map[string]any) (*preview.Preview, error) {
	chrt, err := chart.Load()
	if err != nil {
		return nil, err
	}
	return preview.Compute(ctx, preview.Input{Object: obj.DeepCopy(), Chart: chrt, Values: values,
		Secrets: r.Redactions.Get(client.ObjectKeyFromObject(obj)), DefaultToRetryOnFailure: r.DefaultToRetryOnFailure, Helm: helm})
}

// planEventText is text cut to maxPlanEventLength, on a rune boundary,
// with a note when cut.
func planEventText(text string) string {
	if len(text) <= maxPlanEventLength {
		return text
	}
	cut := maxPlanEventLength - len(planTruncated)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + planTruncated
}

// planRequestedPredicate lets through an update that sets or changes the
// plan request annotation.
type planRequestedPredicate struct{ predicate.Funcs }

func (planRequestedPredicate) Update(e event.UpdateEvent) bool {
	if e.ObjectOld == nil || e.ObjectNew == nil {
		return false
	}
	token, ok := e.ObjectNew.GetAnnotations()[PlanRequestAnnotation]
	return ok && token != e.ObjectOld.GetAnnotations()[PlanRequestAnnotation]
}

// String names the predicate in logs.
func (planRequestedPredicate) String() string {
	return fmt.Sprintf("annotation %s changed", PlanRequestAnnotation)
}
