package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
)

// remediate undoes a failed install or upgrade as the active remediation
// configures: uninstall after a failed install, rollback (or uninstall)
// after a failed upgrade. Once the retries are used up the failure is
// left in place unless remediateLastFailure asks otherwise. It always
// returns an error: the failure that led here, or ErrRetriesExhausted.
func (m *Machine) remediate(ctx context.Context, req *Request, cause error) error {
	rem := req.Object.GetActiveRemediation()
	if rem == nil {
		// A failure no install or upgrade of ours attempted (e.g. a release
		// failed before we managed it): upgrade over it next time.
		return cause
	}
	exhausted := req.Object.RetriesExhausted(rem)
	if exhausted && !rem.MustRemediateLastFailure() {
		return fmt.Errorf("%w: %v", ErrRetriesExhausted, cause)
	}
	// As upstream: a remediation starts from a history cut after the
	// revision it may roll back to, so failures do not pile up.
	cutHistory(req)

	var err error
	switch req.Object.Status.LastAttemptedReleaseAction {
	case helmv2.ReleaseActionInstall:
		err = m.uninstallRemediation(ctx, req)
	case helmv2.ReleaseActionUpgrade:
		if rem.GetStrategy() == helmv2.UninstallRemediationStrategy {
			err = m.uninstallRemediation(ctx, req)
			break
		}
		if missing := missingRollbackTarget(req, rem); missing != nil {
			// Nothing to roll back to (the release never deployed):
			// stop here as upstream does, with neither a rollback nor
			// another failure counted.
			return missing
		}
		err = m.rollback(ctx, req)
	}
	if err != nil {
		return fmt.Errorf("%v; remediation failed: %w", cause, err)
	}
	return remediationEnded(req, cause)
}

// remediationEnded is how a reconcile ends after a remediation, its own or
// one it completed for a reconcile the controller's stop cut short: with
// the failure that led to it, and ErrRetriesExhausted when the next action
// would be the one whose retries are used up. As upstream, an upgrade
// remediated by an uninstall leaves an install to do next, whose retries
// are its own.
func remediationEnded(req *Request, cause error) error {
	rem := req.Object.GetActiveRemediation()
	if rem != nil && req.Object.RetriesExhausted(rem) && !uninstalledAfterUpgrade(req, rem) {
		return fmt.Errorf("%w: %v", ErrRetriesExhausted, cause)
	}
	return &RemediatedError{Cause: cause}
}

// RemediatedError ends a reconcile whose failure was remediated and that
// has retries left: the next attempt follows, rate limited, as upstream
// requeues it, without counting as a reconcile error.
type RemediatedError struct{ Cause error }

func (e *RemediatedError) Error() string { return e.Cause.Error() }
func (e *RemediatedError) Unwrap() error { return e.Cause }

// uninstalledAfterUpgrade tells whether the remediation just run was the
// uninstall of a failed upgrade.
func uninstalledAfterUpgrade(req *Request, rem helmv2.Remediation) bool {
	return req.Object.Status.LastAttemptedReleaseAction == helmv2.ReleaseActionUpgrade &&
		rem.GetStrategy() == helmv2.UninstallRemediationStrategy
}

// rolledBackInSync reports a release that a rollback left in sync with
// the desired state (the spec went back to what the rollback restored)
// as upstream does: the remediation is over, and Released True with
// UpgradeSucceeded speaks for the release, so that it is Ready again
// without another revision.
func rolledBackInSync(req *Request) {
	if !conditions.IsTrue(req.Object, helmv2.RemediatedCondition) {
		return
	}
	latest := req.Object.Status.History.Latest()
	conditions.Delete(req.Object, helmv2.RemediatedCondition)
	conditions.MarkTrue(req.Object, helmv2.ReleasedCondition, helmv2.UpgradeSucceededReason,
		"Helm upgrade succeeded for release %s", describeRelease(latest))
}

// missingRollbackTarget is ErrMissingRollbackTarget when the remediation
// rem of a failed upgrade is a rollback and the history holds no
// successful release to roll back to, as after an install that failed and
// upgrades that failed over it; nil otherwise.
func missingRollbackTarget(req *Request, rem helmv2.Remediation) error {
	if rem == nil || req.Object.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionUpgrade ||
		rem.GetStrategy() != helmv2.RollbackRemediationStrategy ||
		req.Object.Status.History.Previous(ignoreTestFailures(req)) != nil {
		return nil
	}
	return fmt.Errorf("%w: cannot remediate failed release", ErrMissingRollbackTarget)
}

// unremediableFailure is missingRollbackTarget for a failed release a
// later reconcile finds: its failure still counts (nothing changed since)
// and is remediated rather than retried (no RetryOnFailure, no force
// request), so upstream would try the rollback again, and stops again.
func unremediableFailure(req *Request) error {
	rem := req.Object.GetActiveRemediation()
	if req.Force || rem == nil || req.Object.FailureCount(rem) <= 0 ||
		req.Object.GetActiveRetry(req.DefaultToRetryOnFailure) != nil {
		return nil
	}
	return missingRollbackTarget(req, rem)
}
