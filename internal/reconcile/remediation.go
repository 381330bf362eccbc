package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
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

	var err error
	switch req.Object.Status.LastAttemptedReleaseAction {
	case helmv2.ReleaseActionInstall:
		err = m.uninstallRemediation(ctx, req)
	case helmv2.ReleaseActionUpgrade:
		if rem.GetStrategy() == helmv2.UninstallRemediationStrategy {
			err = m.uninstallRemediation(ctx, req)
		} else {
			err = m.rollback(ctx, req)
		}
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
	return cause
}

// uninstalledAfterUpgrade tells whether the remediation just run was the
// uninstall of a failed upgrade.
func uninstalledAfterUpgrade(req *Request, rem helmv2.Remediation) bool {
	return req.Object.Status.LastAttemptedReleaseAction == helmv2.ReleaseActionUpgrade &&
		rem.GetStrategy() == helmv2.UninstallRemediationStrategy
}
