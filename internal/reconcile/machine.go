package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// ErrRetriesExhausted means the last action failed more often than its
// remediation allows; the release waits for a change of spec, chart or
// values, or for a reset request.
var ErrRetriesExhausted = errors.New("retries exhausted")

// ErrMissingRollbackTarget means a failed upgrade is to be remediated by
// a rollback and the history holds no successful release to roll back
// to; as upstream, the release waits for a change of spec, chart or
// values, or for a reset request.
var ErrMissingRollbackTarget = errors.New("missing target release for rollback")

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
	// BeforeChange, when set, is called before the reconcile changes
	// anything about the release (an action, a drift correction, an
	// unlock, a record of what an earlier run left): the caller may have
	// held back its "in progress" status write until it knew the
	// reconcile was more than a check of a release in sync. It may be
	// called more than once per Run. May be nil.
	BeforeChange func()
}

// beforeChange tells the caller that the reconcile is about to act.
func (m *Machine) beforeChange() {
	if m.BeforeChange != nil {
		m.BeforeChange()
	}
}

// announce shows the action about to run, as upstream does: Reconciling
// says "Running '<action>' action with timeout of <timeout>", and before an
// install or upgrade Ready turns Unknown with the same message.
func (m *Machine) announce(req *Request, verb helmverb.Verb, timeout metav1.Duration, release bool) {
	msg := fmt.Sprintf("Running '%s' action with timeout of %s", verb, timeout.Duration)
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
	if errors.As(err, new(*DriftNotCorrectedError)) {
		// summarize made Ready Unknown, as upstream's does for a
		// correction to retry; the event is out already.
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

// newAttempt tells whether req attempts something else than the previous
// attempt recorded in the status: another chart version, other values, or
// another generation. Failures are then counted afresh. As upstream, an OCI
// digest alone does not count: with digest tracking the chart version
// carries the digest, and without it (DisableChartDigestTracking) the
// version decides.
func newAttempt(req *Request) bool {
	st := &req.Object.Status
	lastValues := lastAttemptedValuesDigest(st.LastAttemptedConfigDigest, st.LastAttemptedValuesChecksum)
	return st.LastAttemptedRevision != req.Chart.Metadata().Version || !req.valuesMatch(lastValues) ||
		st.LastAttemptedGeneration != req.Object.Generation
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
	if newAttempt(req) {
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
