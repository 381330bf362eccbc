package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/helmverb"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// install runs a Helm install of the desired chart and values.
func (m *Machine) install(ctx context.Context, req *Request) error {
	return m.release(ctx, req, helmv2.ReleaseActionInstall)
}

// release runs an install or an upgrade; the two differ only in the Helm
// call, the failure counter and the condition reasons.
func (m *Machine) release(ctx context.Context, req *Request, action helmv2.ReleaseAction) error {
	run := req.helmInstall(m.Helm)
	if action == helmv2.ReleaseActionUpgrade {
		run = req.helmUpgrade(m.Helm)
	}
	req.Object.Status.LastAttemptedReleaseAction = action
	// As upstream: a new install or upgrade makes earlier test results and
	// remediations moot, and an install starts the history afresh (nothing
	// before it can be rolled back to).
	conditions.Delete(req.Object, helmv2.TestSuccessCondition)
	conditions.Delete(req.Object, helmv2.RemediatedCondition)
	if action == helmv2.ReleaseActionInstall {
		req.Object.Status.ClearHistory()
	}

	chart, err := req.Chart.Load()
	if err != nil {
		return m.recordRelease(ctx, req, action, nil, fmt.Errorf("loading chart %s: %w", req.Chart.Metadata().Name, err))
	}
	obj := req.Object
	timeout := obj.GetInstall().GetTimeout(obj.GetTimeout())
	if action == helmv2.ReleaseActionUpgrade {
		timeout = obj.GetUpgrade().GetTimeout(obj.GetTimeout())
	}
	m.announce(req, releaseVerb(action), timeout, true)
	started := m.now()
	rel, err := run(ctx, chart, ownMark(req))
	req.Object.Status.LastAttemptedReleaseActionDuration = &metav1.Duration{Duration: m.now().Sub(started)}
	// A forced release is forced once, not on every step of this reconcile.
	req.Force = false
	return m.recordRelease(ctx, req, action, rel, err)
}

// releaseVerb is the verb of an install or upgrade action.
func releaseVerb(action helmv2.ReleaseAction) helmverb.Verb {
	if action == helmv2.ReleaseActionUpgrade {
		return helmverb.Upgrade
	}
	return helmverb.Install
}

// recordRelease records the outcome of an install or upgrade: a snapshot
// of the revision (when Helm stored one), the Released condition and an
// event. It returns the failure, if any, for remediation.
func (m *Machine) recordRelease(ctx context.Context, req *Request, action helmv2.ReleaseAction, rel *releasev1.Release, err error) error {
	succeeded, failed, verb := helmv2.InstallSucceededReason, helmv2.InstallFailedReason, releaseVerb(action)
	if action == helmv2.ReleaseActionUpgrade {
		succeeded, failed = helmv2.UpgradeSucceededReason, helmv2.UpgradeFailedReason
	}
	target := fmt.Sprintf("%s with chart %s@%s", req.releaseName(), req.Chart.Metadata().Name, req.Chart.Metadata().Version)
	stored := rel != nil && m.stored(rel)
	if stored {
		s := recordSnapshot(req, rel, action)
		target = describeRelease(s)
		if err == nil {
			markPreviousSuperseded(req, s)
		}
	}
	if err != nil && m.interrupted(ctx) {
		// Not a failure: the revision waits, pending, for the next run to
		// resume its readiness wait (see StateAwaitingReadiness).
		return fmt.Errorf("Helm %s of release %s interrupted during its readiness wait; the next run resumes it: %w", verb, target, err)
	}
	latest := req.Object.Status.History.Latest()
	var canceled *HealthCheckCanceledError
	if errors.As(err, &canceled) {
		// Counted like any failure: when nothing changes the next
		// reconcile remediates it (see canceledWaitFailure).
		incrementFailures(req, action)
		conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, meta.HealthCheckCanceledReason, "%s", canceled.Error())
		m.normal(req, latest, meta.HealthCheckCanceledReason, fmt.Sprintf(
			"Health checks canceled due to new reconciliation triggered by %s; Helm %s of release %s stopped waiting and the revision is failed",
			canceled.Trigger, verb, target))
		return err
	}
	if err != nil {
		return m.recordFailure(ctx, req, action, failedAttempt{reason: failed, verb: verb, target: target, stored: stored}, err)
	}
	msg := fmt.Sprintf("Helm %s succeeded for release %s", verb, target)
	conditions.MarkTrue(req.Object, helmv2.ReleasedCondition, succeeded, "%s", msg)
	if actionRetry(req, action) != nil {
		// As upstream: under RetryOnFailure the counters only tell how
		// often a failed release was retried; a success ends that.
		req.Object.Status.ClearFailures()
	}
	recordPostRenderDigests(req)
	// A new release is neither tested nor remediated yet.
	conditions.Delete(req.Object, helmv2.RemediatedCondition)
	awaitTests(req, latest)
	m.normal(req, latest, succeeded, msg)
	return nil
}

// failedAttempt is what recordFailure says about a failed install or
// upgrade: the failure reason, the verb, the release it names and whether
// Helm stored a revision for it.
type failedAttempt struct {
	reason, target string
	verb           helmverb.Verb
	stored         bool
}

// recordFailure records a failed install or upgrade: the Released
// condition, a warning event, and whether the attempt counts towards
// remediation.
func (m *Machine) recordFailure(ctx context.Context, req *Request, action helmv2.ReleaseAction, f failedAttempt, err error) error {
	latest := req.Object.Status.History.Latest()
	msg := fmt.Sprintf("Helm %s failed for release %s: %s", f.verb, f.target, trimError(err))
	conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, f.reason, "%s", msg)
	subject := latest
	if !f.stored {
		// The history's head is an earlier revision, or nothing:
		// alerts and commit statuses must name what was attempted.
		subject = attempted(req)
	}
	m.warning(req, subject, f.reason, msg)
	if !f.stored && errors.Is(err, sequencing.ErrInvalidOrder) {
		countFailure(ctx, req)
		return fmt.Errorf("%w: %s", ErrChartCannotApply, msg)
	}
	if !f.stored || ctx.Err() != nil {
		// Nothing stored, or the controller stopped in the middle of
		// the action (Helm then fails the revision with "context
		// canceled"): nothing is known about the release itself, so
		// the attempt is not counted towards remediation and the next
		// run tries again instead of stalling on used-up retries.
		countFailure(ctx, req)
		return &notRecordedError{err: errors.New(msg)}
	}
	if last := m.Helm.LastWritten(); last != nil && last.Info != nil && last.Info.Status.IsPending() {
		// Helm could not record the failure (the cluster holding its
		// storage could not be reached when the wait timed out):
		// storage still has the revision pending. Remediating over it
		// would leave it pending for good behind the rollback; the
		// next reconcile unlocks it as failed and tries again, as
		// after an interrupted action.
		countFailure(ctx, req)
		return &notRecordedError{err: fmt.Errorf("%s; the failure could not be recorded in Helm storage, where %s is still %s",
			msg, releaseID(last), last.Info.Status)}
	}
	incrementFailures(req, action)
	return fmt.Errorf("%s", msg)
}

// awaitTests marks a new release untested, as upstream: with tests enabled,
// TestSuccess is Unknown AwaitingTests until they have run, and Ready
// follows it (when test failures count) in the status written while they
// run; without tests no earlier result is carried over.
func awaitTests(req *Request, latest *helmv2.Snapshot) {
	if !req.Object.GetTest().Enable || latest == nil {
		conditions.Delete(req.Object, helmv2.TestSuccessCondition)
		return
	}
	conditions.MarkUnknown(req.Object, helmv2.TestSuccessCondition, awaitingTestsReason,
		"Helm release %s with chart %s is awaiting tests", latest.FullReleaseName(), latest.VersionedChartName())
	summarize(req)
}

// awaitingTestsReason is upstream's reason for TestSuccess (and Ready)
// between a release and its tests.
const awaitingTestsReason = "AwaitingTests"

// notRecordedError is a failure that says nothing about the release: the
// install or upgrade failed before Helm stored a revision (the chart did
// not render, Helm refused to start), the controller stopped in the middle
// of it, Helm could not record the failure (the revision is still
// pending), or the API failed around a resumed readiness wait (the
// revision is still pending). Nothing is counted towards remediation or remediated, and
// the reconcile is retried with backoff, as upstream does for the first.
// A values typo must not roll back a healthy release, and a timeout of the
// API must not uninstall one whose resources may be ready.
type notRecordedError struct{ err error }

func (e *notRecordedError) Error() string { return e.err.Error() }
func (e *notRecordedError) Unwrap() error { return e.err }

// interrupted tells whether ctx ended (the controller is stopping) while
// an afterHooks readiness wait ran, leaving the revision pending with its
// marker for the next run to resume.
func (m *Machine) interrupted(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	last := m.Helm.LastWritten()
	if last == nil {
		return false
	}
	awaiting, _ := afterhooks.IsAwaitingReadiness(last)
	return awaiting
}

// stored tells whether rel is in Helm storage. A chart that fails to render
// fails before Helm writes anything, yet Helm returns its in-memory release
// with the error; the history must only describe releases that exist.
// What the action wrote says so; storage is not read back.
func (m *Machine) stored(rel *releasev1.Release) bool {
	last := m.Helm.LastWritten()
	return last != nil && last.Version == rel.Version && last.Name == rel.Name
}

// markPreviousSuperseded mirrors in the history what Helm did in storage
// when a new release was deployed: it supersedes the deployed revision or,
// when none is (an upgrade over a failed install), the failed revision the
// upgrade was made over. The history then keeps what upstream's keeps: the
// new revision and the one before it.
func markPreviousSuperseded(req *Request, current *helmv2.Snapshot) {
	history := req.Object.Status.History
	superseded := false
	for _, s := range history {
		if s != current && s.Status == "deployed" {
			s.Status, superseded = "superseded", true
		}
	}
	if !superseded && len(history) > 1 && history[0] == current && history[1].Status == "failed" {
		history[1].Status = "superseded"
	}
}
