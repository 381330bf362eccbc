package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxSteps bounds the actions of one reconcile. A full path is unlock,
// upgrade, test: far below it. Reaching it means the machine is cycling.
const maxSteps = 10

// ErrRetriesExhausted means the last action failed more often than its
// remediation allows; the release waits for a change of spec, chart or
// values, or for a reset request.
var ErrRetriesExhausted = errors.New("retries exhausted")

// ErrChartCannotApply means the chart cannot be applied as it is: its
// resource order has a cycle or an ordering annotation that cannot be
// read (see internal/sequencing). It fails while Helm renders, so nothing
// was stored or applied, and retrying renders the same chart again: only
// a new chart (or spec) helps.
var ErrChartCannotApply = errors.New("the chart cannot be applied as it is")

// RetryAfterError asks the caller to try again after a delay
// (strategy RetryOnFailure) instead of the usual backoff.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Machine runs the release state machine for one HelmRelease.
type Machine struct {
	Helm     Helm
	Recorder EventRecorder
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Progress, when set, is told before each Helm action runs, with the
	// Reconciling message the machine has just set, so the caller can write
	// the status while Helm works. May be nil.
	Progress func(msg string)
}

// announce shows the action about to run, as upstream does: Reconciling
// says "Running '<action>' action with timeout of <timeout>", and before an
// install or upgrade Ready turns Unknown with the same message.
func (m *Machine) announce(req *Request, action string, timeout metav1.Duration, release bool) {
	msg := fmt.Sprintf("Running '%s' action with timeout of %s", action, timeout.Duration)
	conditions.MarkReconciling(req.Object, meta.ProgressingReason, "%s", msg)
	if release {
		conditions.MarkUnknown(req.Object, meta.ReadyCondition, meta.ProgressingReason, "%s", msg)
	}
	if m.Progress != nil {
		m.Progress(msg)
	}
}

func (m *Machine) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Run brings the release to the desired state of req, changing
// req.Object's status along the way. It returns nil when the release is in
// sync (and, when enabled, tested).
func (m *Machine) Run(ctx context.Context, req *Request) (err error) {
	m.trackAttempt(req)
	defer func() {
		summarize(req)
		m.notReady(req, err)
	}()
	// A reconcile corrects drift once; drift that survives the correction
	// is reported instead of corrected again in a loop.
	correctedDrift := false
	for step := 0; step < maxSteps; step++ {
		cur, err := m.lastRelease(ctx)
		if err != nil {
			return err
		}
		obs := Observe(req, cur)
		if obs.State == StateInSync {
			// In sync, so the release matches the spec's post renderers;
			// this records them for a release adopted without a digest,
			// whatever drift detection finds next.
			recordPostRenderDigests(req)
			var set jsondiff.DiffSet
			if obs, set, err = m.observeDrift(ctx, req, cur, obs); err != nil {
				return err
			}
			if obs.State == StateDrifted {
				if correctedDrift {
					return m.driftPersists(req, cur, set)
				}
				correctedDrift = true
				done, err := m.drifted(ctx, req, cur, set)
				if err != nil || done {
					return err
				}
				continue
			}
		}
		done, err := m.step(ctx, req, cur, obs)
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("release did not settle after %d actions; last state was not in sync", maxSteps)
}

func (m *Machine) step(ctx context.Context, req *Request, cur *releasev1.Release, obs Observation) (bool, error) {
	switch obs.State {
	case StateInSync:
		return true, nil
	case StateAbsent:
		if err := m.checkRetries(req, helmv2.ReleaseActionInstall); err != nil {
			return true, err
		}
		return false, m.failed(ctx, req, m.install(ctx, req))
	case StateUnmanaged, StateOutOfSync:
		if target := unrecordedRollback(req, cur); obs.State == StateUnmanaged && target != nil {
			return true, m.recordUnrecordedRollback(ctx, req, cur, target)
		}
		if obs.State == StateUnmanaged && unrecordedRelease(req, cur) {
			m.recordUnrecordedRelease(req, cur)
			return false, nil
		}
		if err := m.checkRetries(req, helmv2.ReleaseActionUpgrade); err != nil {
			return true, err
		}
		if mustReinstall(req, cur) {
			return false, m.reinstall(ctx, req, cur)
		}
		return false, m.failed(ctx, req, m.upgrade(ctx, req))
	case StateLocked:
		return false, m.unlock(ctx, req, cur)
	case StateUninstalling:
		return true, m.finishUninstall(ctx, req)
	case StateAwaitingReadiness:
		pending := cur.Info.Status
		if reason := staleHeldRevision(req, cur); reason != "" {
			// Not the desired state any more: release it (marked failed,
			// not charged to the new attempt) and move on to the new
			// revision, which supersedes it.
			m.normal(req, nil, pendingReleaseReason, fmt.Sprintf(
				"Release %s was held for its readiness wait by an earlier run, but the desired state changed since (%s); the new revision supersedes it",
				releaseID(cur), reason))
			return false, m.unlock(ctx, req, cur)
		}
		err := m.resume(ctx, req, cur)
		if pending == common.StatusPendingRollback {
			// A rollback is itself the remediation: whatever its outcome,
			// this reconcile ends here, as after any remediation.
			return true, err
		}
		return false, m.failed(ctx, req, err)
	case StateUntested:
		return false, m.failed(ctx, req, m.test(ctx, req))
	case StateFailed:
		if interruptedRollback(req) {
			return true, m.finishRollback(ctx, req)
		}
		if err := canceledWaitFailure(req); err != nil {
			// The reconcile that failed the revision by cancelling its
			// wait left its remediation to this one, and the desired state
			// did not change since (that would have reset the counters).
			return true, m.failed(ctx, req, err)
		}
		// A failure that is not remediated (RetryOnFailure, or counters
		// reset by a new attempt) is retried with the action that failed;
		// Helm replaces a failed install in place.
		action := req.Object.Status.LastAttemptedReleaseAction
		if action != helmv2.ReleaseActionInstall {
			action = helmv2.ReleaseActionUpgrade
		}
		if err := m.checkRetries(req, action); err != nil {
			return true, err
		}
		return false, m.failed(ctx, req, m.release(ctx, req, action))
	}
	return true, fmt.Errorf("unknown release state %q", obs.State)
}

// interruptedRollback tells whether the latest revision is a rollback that
// failed without the rollback itself failing: the controller stopped in its
// middle and the next one unlocked it. A rollback that failed on its own
// says so in Remediated (RollbackFailed) and is left as upstream leaves it.
func interruptedRollback(req *Request) bool {
	latest := req.Object.Status.History.Latest()
	if latest == nil || latest.Action != helmv2.ReleaseActionRollback || latest.Status != common.StatusFailed.String() {
		return false
	}
	c := conditions.Get(req.Object, helmv2.RemediatedCondition)
	return c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.RollbackFailedReason
}

// finishRollback does an interrupted rollback again: the remediation the
// failed upgrade asked for, which a restart must not leave half done (the
// upgrade's retries may be used up, so nothing else would ever act). Like
// any remediation it ends the reconcile with the failure that led to it.
func (m *Machine) finishRollback(ctx context.Context, req *Request) error {
	if err := m.rollback(ctx, req); err != nil {
		return err
	}
	return remediationEnded(req, errors.New("the rollback remediating a failed upgrade was interrupted and has been done again"))
}

// unrecordedRollback returns the snapshot a release in storage rolled back
// to, when that release is a rollback Helm finished whose controller
// stopped before writing it to the history: the revision right after the
// history's latest, which Helm describes as "Rollback to N" with N in the
// history. Otherwise it returns nil.
func unrecordedRollback(req *Request, cur *releasev1.Release) *helmv2.Snapshot {
	latest := req.Object.Status.History.Latest()
	if latest == nil || cur == nil || cur.Info == nil || !latest.Targets(cur.Name, cur.Namespace, cur.Version-1) {
		return nil
	}
	if cur.Info.Status != common.StatusDeployed && cur.Info.Status != common.StatusFailed {
		return nil
	}
	to, ok := strings.CutPrefix(cur.Info.Description, "Rollback to ")
	if !ok {
		return nil
	}
	version, err := strconv.Atoi(to)
	if err != nil {
		return nil
	}
	for _, s := range req.Object.Status.History {
		if s.Version == version {
			return s
		}
	}
	return nil
}

// unrecordedRelease tells whether cur is an install or upgrade Helm
// finished whose controller stopped before writing it to the history: the
// deployed revision right after the history's latest, made from the
// desired chart and values. Upgrading over it would only repeat it, hooks
// included.
//
// For a first install the history is empty: the announce that preceded it
// cleared it and recorded the install as attempted. A release nobody
// attempted to install here (made with helm install, say) is not ours to
// record and is upgraded, as upstream does.
func unrecordedRelease(req *Request, cur *releasev1.Release) bool {
	if cur == nil || cur.Info == nil || cur.Info.Status != common.StatusDeployed ||
		strings.HasPrefix(cur.Info.Description, "Rollback to ") {
		return false
	}
	status := req.Object.Status
	latest := status.History.Latest()
	switch {
	case latest == nil && status.LastAttemptedReleaseAction == helmv2.ReleaseActionInstall:
	case latest != nil && latest.Targets(cur.Name, cur.Namespace, cur.Version-1):
	default:
		return false
	}
	return chartOrValuesChange(req, newSnapshot(req, cur, "")) == ""
}

// recordUnrecordedRelease writes to the status the install or upgrade cur
// that Helm finished before its controller stopped, as that controller
// would have.
func (m *Machine) recordUnrecordedRelease(req *Request, cur *releasev1.Release) {
	action := req.Object.Status.LastAttemptedReleaseAction
	if action != helmv2.ReleaseActionInstall {
		action = helmv2.ReleaseActionUpgrade
	}
	s := recordSnapshot(req, cur, action)
	markPreviousSuperseded(req, s)
	reason := helmv2.UpgradeSucceededReason
	if action == helmv2.ReleaseActionInstall {
		reason = helmv2.InstallSucceededReason
	}
	msg := fmt.Sprintf("Helm %s succeeded for release %s (recorded after a restart of the controller)", action, describeRelease(s))
	conditions.MarkTrue(req.Object, helmv2.ReleasedCondition, reason, "%s", msg)
	recordPostRenderDigests(req)
	conditions.Delete(req.Object, helmv2.TestSuccessCondition)
	conditions.Delete(req.Object, helmv2.RemediatedCondition)
}

// recordUnrecordedRollback writes to the status the outcome of a rollback
// Helm finished after its controller had reported it started, and ends the
// reconcile as that remediation would have.
func (m *Machine) recordUnrecordedRollback(ctx context.Context, req *Request, cur *releasev1.Release, target *helmv2.Snapshot) error {
	s := recordSnapshot(req, cur, helmv2.ReleaseActionRollback)
	var failed error
	if cur.Info.Status == common.StatusFailed {
		failed = errors.New("its revision failed while the controller restarted")
	}
	if err := m.reportRollback(ctx, req, s, describeRelease(target), failed); err != nil {
		return err
	}
	return remediationEnded(req, errors.New("the rollback remediating a failed upgrade finished while the controller restarted"))
}

// finishUninstall completes an uninstall remediation a stop of the
// controller cut short: left "uninstalling", the release is neither
// installed nor gone, and no other action can work on it. Like any
// remediation it ends the reconcile with the failure that led to it.
func (m *Machine) finishUninstall(ctx context.Context, req *Request) error {
	if err := m.uninstallRemediation(ctx, req); err != nil {
		return err
	}
	return remediationEnded(req, errors.New("the uninstall remediating a failed release was interrupted and has been done again"))
}

// staleHeldRevision says why a revision held pending by afterHooks no
// longer matches the desired state (chart or values changed since it was
// made), or "" when it does. Rollbacks are remediations of their own and
// always finish.
func staleHeldRevision(req *Request, cur *releasev1.Release) string {
	if cur.Info.Status == common.StatusPendingRollback {
		return ""
	}
	if req.previousOCIDigest != req.OCIDigest {
		// Helm's record does not say which OCI artifact the revision was
		// made from; the previous attempt does.
		return fmt.Sprintf("chart artifact changed from '%s' to '%s'", req.previousOCIDigest, req.OCIDigest)
	}
	return chartOrValuesChange(req, newSnapshot(req, cur, ""))
}

func (m *Machine) lastRelease(ctx context.Context) (*releasev1.Release, error) {
	rel, err := m.Helm.LastRelease(ctx)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, &stateError{err: err}
	}
	return rel, nil
}

// stateErrorReason is upstream's Ready reason when Helm storage cannot be
// read, so the state of the release is unknown.
const stateErrorReason = "StateError"

// stateError is a failure to read the release's state from Helm storage.
type stateError struct{ err error }

func (e *stateError) Error() string {
	return fmt.Sprintf("Could not determine release state: %v", e.err)
}
func (e *stateError) Unwrap() error { return e.err }

// notReady keeps the promise that Ready is True only after a reconcile
// that succeeded: summarize speaks for the release's recorded outcome,
// which a reconcile that then failed (storage unreadable, a check that
// errored) must not pass off as current. Failures the actions recorded
// already made Ready False and keep their own reason.
func (m *Machine) notReady(req *Request, err error) {
	if err == nil || conditions.IsFalse(req.Object, meta.ReadyCondition) {
		return
	}
	reason := meta.ReconciliationFailedReason
	if errors.As(err, new(*stateError)) {
		reason = stateErrorReason
	}
	conditions.MarkFalse(req.Object, meta.ReadyCondition, reason, "%s", err)
	if errors.Is(err, context.Canceled) {
		// An interruption (shutdown, a new revision) is not a failure to
		// announce; the next run carries on.
		return
	}
	m.event(req, nil, corev1.EventTypeWarning, reason, err.Error())
}

// trackAttempt records what this reconcile attempts, and starts failure
// counting afresh when that differs from the previous attempt: a new chart
// version, new values or a new generation get their own retries.
func (m *Machine) trackAttempt(req *Request) {
	obj := req.Object
	st := &obj.Status
	revision := req.Chart.Metadata().Version
	req.specChanged = st.LastAttemptedGeneration != obj.Generation
	req.previousOCIDigest = st.LastAttemptedRevisionDigest
	lastValues := lastAttemptedValuesDigest(st.LastAttemptedConfigDigest, st.LastAttemptedValuesChecksum)
	if st.LastAttemptedRevision != revision || !req.valuesMatch(lastValues) ||
		st.LastAttemptedGeneration != obj.Generation || st.LastAttemptedRevisionDigest != req.OCIDigest {
		st.ClearFailures()
	}
	st.LastAttemptedRevision = revision
	st.LastAttemptedRevisionDigest = req.OCIDigest
	st.LastAttemptedConfigDigest = req.ConfigDigest
	st.LastAttemptedGeneration = obj.Generation
	// Deprecated fields an older controller may have left behind: upstream
	// clears them on every attempt.
	st.LastAttemptedValuesChecksum = ""
	st.LastReleaseRevision = 0
}

// checkRetries stops before an install or upgrade when the previous
// attempts of that action used up their retries.
func (m *Machine) checkRetries(req *Request, action helmv2.ReleaseAction) error {
	st := req.Object.Status
	if st.LastAttemptedReleaseAction != action {
		return nil
	}
	up := req.Object.Upstream()
	if up.GetActiveRetry(req.DefaultToRetryOnFailure) != nil {
		return nil
	}
	rem := up.GetActiveRemediation()
	if rem == nil || !rem.RetriesExhausted(up) {
		return nil
	}
	return fmt.Errorf("%w: %s failed %d times (retries: %d)", ErrRetriesExhausted, action, rem.GetFailureCount(up), rem.GetRetries())
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
	up := req.Object.Upstream()
	if retry := up.GetActiveRetry(req.DefaultToRetryOnFailure); retry != nil {
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
