package controller

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// TestOutcomeReconciling checks the Reconciling condition a reconcile ends
// with, as upstream: a failure that will be retried leaves it True with
// reason ProgressingWithRetry and Ready's message; exhausted retries stall
// and remove it, and are not looked at again until something changes.
func TestOutcomeReconciling(t *testing.T) {
	const failed = "Helm upgrade failed for release apps/web with chart podinfo@6.7.1: timeout"
	cases := []struct {
		name       string
		err        error
		wantReason string // "" when Reconciling must be gone
		// wantStalled, when set, is the Stalled condition's
		// "reason: message".
		wantStalled string
		// wantRequeue is the requeue of a stalled release: none, as
		// upstream's terminal error, where only a change helps.
		wantRequeue time.Duration
		// wantTerminal: the reconcile ends with a terminal error, as
		// upstream's, so controller-runtime counts and logs it without
		// retrying.
		wantTerminal bool
	}{
		{name: "failure retried with backoff", err: errors.New(failed), wantReason: meta.ProgressingWithRetryReason},
		{name: "RetryOnFailure wait", err: &reconcile.RetryAfterError{After: time.Minute}, wantReason: meta.ProgressingWithRetryReason},
		{name: "retries exhausted", err: fmt.Errorf("%w: upgrade failed 3 times", reconcile.ErrRetriesExhausted), wantTerminal: true},
		{name: "no rollback target", err: fmt.Errorf("%w: cannot remediate failed release", reconcile.ErrMissingRollbackTarget),
			wantStalled: "MissingRollbackTarget: Failed to perform remediation: missing target release for rollback: cannot remediate failed release", wantTerminal: true},
		{name: "chart that cannot be applied", err: fmt.Errorf("%w: resource groups of chart web depend on each other in a cycle", reconcile.ErrChartCannotApply),
			wantRequeue: time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v2.HelmRelease{}
			obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
			conditions.MarkReconciling(obj, meta.ProgressingReason, "Running 'upgrade' action with timeout of 5m0s")
			conditions.MarkFalse(obj, meta.ReadyCondition, "UpgradeFailed", "%s", failed)
			r := &HelmReleaseReconciler{}
			res, err := r.outcome(obj, tc.err)
			c := conditions.Get(obj, meta.ReconcilingCondition)
			if tc.wantReason == "" {
				if c != nil {
					t.Errorf("Reconciling %+v, want none", c)
				}
				terminal := err != nil && errors.Is(err, ctrlreconcile.TerminalError(nil))
				if (err != nil && !terminal) || terminal != tc.wantTerminal || res.RequeueAfter != tc.wantRequeue || res.Requeue {
					t.Errorf("outcome = %+v, %v; want terminal error %t (no backoff) and a requeue after %s", res, err, tc.wantTerminal, tc.wantRequeue)
				}
				if !conditions.IsStalled(obj) || conditions.GetMessage(obj, meta.StalledCondition) == "" {
					t.Errorf("Stalled %+v, want True with a message", conditions.Get(obj, meta.StalledCondition))
				}
				stalled := conditions.GetReason(obj, meta.StalledCondition) + ": " + conditions.GetMessage(obj, meta.StalledCondition)
				if tc.wantStalled != "" && stalled != tc.wantStalled {
					t.Errorf("Stalled %q, want %q", stalled, tc.wantStalled)
				}
				return
			}
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.wantReason || c.Message != failed {
				t.Errorf("Reconciling %+v, want True/%s with Ready's message", c, tc.wantReason)
			}
		})
	}
}

// A remediation that leaves retries ends the reconcile as upstream's
// requeue does: rate limited, Reconciling with retry, but no reconcile
// error and no generation observed (errWaiting, which Reconcile clears).
func TestOutcomeAfterARemediationWithRetriesLeft(t *testing.T) {
	obj := &v2.HelmRelease{}
	conditions.MarkFalse(obj, meta.ReadyCondition, "UpgradeFailed", "upgrade failed")
	res, err := (&HelmReleaseReconciler{}).outcome(obj, &reconcile.RemediatedError{Cause: errors.New("upgrade failed")})
	if !res.Requeue || !errors.Is(err, errWaiting) {
		t.Errorf("outcome = %+v, %v; want a requeue and errWaiting", res, err)
	}
	if c := conditions.Get(obj, meta.ReconcilingCondition); c == nil || c.Reason != meta.ProgressingWithRetryReason {
		t.Errorf("Reconciling %+v, want ProgressingWithRetry", c)
	}
}
