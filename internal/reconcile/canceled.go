package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HealthCheckCanceledError is the error of an action whose readiness wait
// was abandoned because something asked for a new reconcile of the
// HelmRelease meanwhile (the CancelHealthCheckOnNewRevision feature gate).
// Helm failed the revision; the machine neither retries nor remediates it
// in this reconcile: the next one, already queued, decides with the new
// desired state.
type HealthCheckCanceledError struct {
	// Trigger names the object whose change asked for the new reconcile,
	// as "Kind/namespace/name".
	Trigger string
	// Err is the action's error.
	Err error
}

func (e *HealthCheckCanceledError) Error() string {
	return fmt.Sprintf("New reconciliation triggered by %s", e.Trigger)
}

func (e *HealthCheckCanceledError) Unwrap() error { return e.Err }

// CanceledBy turns err, an action's error, into a
// *HealthCheckCanceledError when a new revision (trigger, not empty)
// cancelled the action's wait; other errors pass unchanged.
func CanceledBy(trigger string, err error) error {
	if err == nil || trigger == "" || !errors.Is(err, context.Canceled) {
		return err
	}
	return &HealthCheckCanceledError{Trigger: trigger, Err: err}
}

// canceledWaitFailure returns the failure of a revision whose readiness
// wait a previous reconcile cancelled, when that failure still counts: the
// Released condition says so and the failure counters were not reset by a
// new chart, values or generation. Otherwise it returns nil.
func canceledWaitFailure(req *Request) error {
	released := conditions.Get(req.Object, helmv2.ReleasedCondition)
	if released == nil || released.Status != metav1.ConditionFalse || released.Reason != meta.HealthCheckCanceledReason {
		return nil
	}
	if req.Object.Status.Failures == 0 {
		return nil
	}
	return fmt.Errorf("the readiness wait of the last release was canceled (%s) and nothing changed since", released.Message)
}
