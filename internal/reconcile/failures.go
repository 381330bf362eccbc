package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// attempted describes, for an event's metadata, the release an install or
// upgrade tried to make when Helm stored nothing of it: the chart and
// values it was given, as upstream's failure events name them.
func attempted(req *Request) *helmv2.Snapshot {
	md := req.Chart.Metadata()
	return &helmv2.Snapshot{ChartVersion: md.Version, ConfigDigest: req.ConfigDigest, AppVersion: md.AppVersion}
}

// actionRetry is the retry strategy (RetryOnFailure) of action, install or
// upgrade, with the DefaultToRetryOnFailure gate; nil when it remediates.
func actionRetry(req *Request, action helmv2.ReleaseAction) helmv2.Retry {
	if action == helmv2.ReleaseActionUpgrade {
		return req.Object.GetUpgrade().GetRetry(req.DefaultToRetryOnFailure)
	}
	return req.Object.GetInstall().GetRetry(req.DefaultToRetryOnFailure)
}

// retriesExhausted stops before an install or upgrade (decide) when the
// previous attempts of action used up their retries: the error ends the
// reconcile, and says why the preview predicts no step.
func retriesExhausted(req *Request, action helmv2.ReleaseAction) error {
	st := req.Object.Status
	if st.LastAttemptedReleaseAction != action {
		return nil
	}
	if req.Object.GetActiveRetry(req.DefaultToRetryOnFailure) != nil {
		return nil
	}
	rem := req.Object.GetActiveRemediation()
	if rem == nil || !req.Object.RetriesExhausted(rem) {
		return nil
	}
	return fmt.Errorf("%w: %s failed %d times (retries: %d)", ErrRetriesExhausted, action, req.Object.FailureCount(rem), rem.GetRetries())
}

// failed follows a failed action with what the spec asks for: a retry
// later (RetryOnFailure) or a remediation (RemediateOnFailure). It returns
// the action's error so the reconcile ends and is retried.
func (m *Machine) failed(ctx context.Context, req *Request, actionErr error) error {
	if actionErr == nil {
		return nil
	}
	if ctx.Err() != nil {
		// The controller is stopping (SIGTERM, the OOM watch, lost
		// leadership). A remediation would run Helm actions a shutdown
		// cannot stop, and undo a revision the next run may resume; the
		// next run decides instead.
		return actionErr
	}
	var canceled *HealthCheckCanceledError
	if errors.As(actionErr, &canceled) {
		// The next reconcile is already queued and knows the new desired
		// state: remediating now would only undo what it will replace.
		return actionErr
	}
	if errors.As(actionErr, new(*notRecordedError)) {
		return actionErr
	}
	if retry := req.Object.GetActiveRetry(req.DefaultToRetryOnFailure); retry != nil {
		return &RetryAfterError{Err: actionErr, After: retry.GetRetryInterval()}
	}
	return m.remediate(ctx, req, actionErr)
}

// incrementFailures counts a failed install or upgrade that Helm stored,
// where remediation looks, and in status.failures.
func incrementFailures(req *Request, action helmv2.ReleaseAction) {
	st := &req.Object.Status
	st.Failures++
	countActionFailure(req, action)
}

// countFailure counts a failed action in status.failures only, as upstream
// does for every action that fails (a refused install, a failed test, a
// failed remediation), whether or not it counts for remediation. An action
// the controller's own shutdown cut short (SIGTERM, a leader handover, the
// OOM watch) is not counted: the failure is the controller's, not the
// release's, and a rollout of the controller must leave the counters as
// they were.
func countFailure(ctx context.Context, req *Request) {
	if ctx.Err() != nil {
		return
	}
	req.Object.Status.Failures++
}

// countActionFailure counts a failure where the remediation of action
// looks: installFailures or upgradeFailures.
func countActionFailure(req *Request, action helmv2.ReleaseAction) {
	st := &req.Object.Status
	switch action {
	case helmv2.ReleaseActionInstall:
		st.InstallFailures++
	case helmv2.ReleaseActionUpgrade:
		st.UpgradeFailures++
	}
}
