package reconcile

import (
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// Step names the first thing a reconcile does about a release, as Next
// predicts it.
type Step string

const (
	// StepNone: the release is in sync, or the retries are used up.
	StepNone Step = "none"
	// StepInstall, StepUpgrade, StepTest, StepRollback and StepUninstall
	// run the Helm action of the same name: their names are the verbs.
	StepInstall   = Step(helmverb.Install)
	StepUpgrade   = Step(helmverb.Upgrade)
	StepTest      = Step(helmverb.Test)
	StepRollback  = Step(helmverb.Rollback)
	StepUninstall = Step(helmverb.Uninstall)
	// StepReinstall is what the controller does before the state machine
	// when the release's target changed (TargetChanged): it uninstalls
	// the recorded release, and the next reconcile installs afresh.
	StepReinstall Step = "reinstall"
	// StepUnlock marks a release stuck pending as failed; the reconcile
	// then observes it again.
	StepUnlock Step = "unlock"
	// StepResume finishes the afterHooks readiness wait an earlier run
	// left pending.
	StepResume Step = "resume"
	// StepRecord writes to the history what Helm finished before a stop of
	// the controller; no Helm action runs.
	StepRecord Step = "record"
)

// Verbs are the Helm actions s runs, in order, as a preview of the step
// shows them. StepUnlock, StepResume and StepRecord run none of them:
// they mark, wait for or record a revision Helm already made.
func (s Step) Verbs() []helmverb.Verb {
	switch s {
	case StepInstall, StepUpgrade, StepTest, StepRollback, StepUninstall:
		return []helmverb.Verb{helmverb.Verb(s)}
	case StepReinstall:
		return []helmverb.Verb{helmverb.Uninstall, helmverb.Install}
	}
	return nil
}

// Next is what the next reconcile would start with, and why.
type Next struct {
	Observation
	Step Step
	// Why adds to the observation's reason what picked the step (a
	// remediation strategy, used-up retries); may be empty.
	Why string

	// What the machine needs to carry the step out, beyond the step and
	// the observation: one Step stands for more than one way to do it.
	// (The observed state tells the upgrade of a release taken over or
	// of a failed one from a plain upgrade.)

	// end is the error a StepNone ends the reconcile with (used-up
	// retries, a failure no remediation can undo, a state the machine
	// does not know); nil when in sync.
	end error
	// canceledWait is the failure whose remediation a reconcile that
	// cancelled its readiness wait left to this one. Step names that
	// remediation (StepNone for none); the machine hands the failure to
	// failed, which runs it, or ends the reconcile with the failure.
	canceledWait error
	// rollbackTarget is, for StepRecord, the revision an unrecorded
	// rollback restored; nil for an unrecorded install or upgrade.
	rollbackTarget *helmv2.Snapshot
	// staleHeld is, for StepUnlock of a revision held for its readiness
	// wait, how the desired state changed since it was held.
	staleHeld string
}

// Predict returns the step Run takes first for the release cur (nil: none
// in storage) and req: the decision the machine's step carries out, made
// on the same observation, without acting. Drift (spec.driftDetection) is
// not predicted: it needs the cluster.
func Predict(req *Request, cur *releasev1.Release) Next {
	req = withAttemptTracked(req)
	return decide(req, cur, Observe(req, cur))
}

// withAttemptTracked is req as the machine sees it once it recorded the
// attempt (trackAttempt): with the failures cleared when req attempts
// something new, on a copy of the object, which Predict must not change.
func withAttemptTracked(req *Request) *Request {
	if !newAttempt(req) {
		return req
	}
	tracked := *req
	tracked.Object = req.Object.DeepCopy()
	tracked.Object.Status.ClearFailures()
	return &tracked
}

// decide picks the step for the release cur (nil: none in storage),
// observed as obs against req. It reads and changes nothing: Predict
// reports what it picks, and the machine's step carries it out.
func decide(req *Request, cur *releasev1.Release, obs Observation) Next {
	n := Next{Observation: obs, Step: StepNone}
	switch obs.State {
	case StateInSync:
		return n
	case StateAbsent:
		return n.guarded(req, helmv2.ReleaseActionInstall, StepInstall)
	case StateUnmanaged:
		return n.decideUnmanaged(req, cur)
	case StateOutOfSync:
		// A chart renamed under chartNameChangeStrategy Reinstall never
		// gets here: the controller uninstalls the release first (see
		// TargetChanged).
		return n.guarded(req, helmv2.ReleaseActionUpgrade, StepUpgrade)
	case StateLocked:
		n.Step = StepUnlock
	case StateUninstalling:
		n.Step = StepUninstall
	case StateAwaitingReadiness:
		n.Step = StepResume
		if reason := staleHeldRevision(req, cur); reason != "" {
			n.Step, n.staleHeld = StepUnlock, reason
			n.Why = "the desired state changed since the revision was held: " + reason
		}
	case StateUntested:
		n.Step = StepTest
	case StateFailed:
		return n.decideFailed(req)
	default:
		return n.stop(fmt.Errorf("unknown release state %q", obs.State))
	}
	return n
}

// decideUnmanaged decides about a release the history does not describe: an
// install, upgrade or rollback of the controller's own that Helm finished
// before a stop of the controller is recorded instead of repeated (see
// ownRevision). Any other release the controller did not make (by hand
// with the helm CLI, by another tool) is taken over as upstream does:
// upgraded whatever retries earlier upgrades used up, as those were of
// revisions that are not the release any more.
func (n Next) decideUnmanaged(req *Request, cur *releasev1.Release) Next {
	n.rollbackTarget = unrecordedRollback(req, cur)
	if n.rollbackTarget != nil || unrecordedRelease(req, cur) {
		n.Step, n.Why = StepRecord, "Helm finished the action before the controller recorded it"
		return n
	}
	n.Step, n.Why = StepUpgrade, "the release was not made by this HelmRelease (no mark of its own): it is taken over"
	return n
}

// decideFailed decides about a release whose last action failed: finish an
// interrupted rollback, remediate a failure a cancelled readiness wait
// left to this reconcile, or retry the action that failed.
func (n Next) decideFailed(req *Request) Next {
	if interruptedRollback(req) {
		n.Step, n.Why = StepRollback, "a rollback remediating a failed upgrade was interrupted"
		return n
	}
	if err := canceledWaitFailure(req); err != nil {
		// The desired state did not change since the wait was cancelled:
		// that would have reset the counters.
		n.canceledWait = err
		n.Step, n.Why = remediationOf(req)
		return n
	}
	// A failure that is not remediated (RetryOnFailure, or counters
	// reset by a new attempt) is retried, as upstream does, with an
	// upgrade over the failed revision, a failed first install included:
	// upgrade hooks, Upgrade* reasons, and upgrade remediation from then
	// on. A release is installed afresh only when nothing of it is left
	// (StateAbsent), e.g. after an uninstall remediation.
	// The retries that count are those of the action that failed.
	n = n.guarded(req, req.Object.Status.LastAttemptedReleaseAction, StepUpgrade)
	if n.Step != StepUpgrade {
		return n
	}
	if err := unremediableFailure(req); err != nil {
		return n.stop(err)
	}
	return n
}

// guarded is n with step, unless the retries of action are used up.
func (n Next) guarded(req *Request, action helmv2.ReleaseAction, step Step) Next {
	if err := retriesExhausted(req, action); err != nil {
		return n.stop(err)
	}
	n.Step = step
	return n
}

// stop is n ending the reconcile with err, which also says why.
func (n Next) stop(err error) Next {
	n.Step, n.Why, n.end = StepNone, err.Error(), err
	return n
}

// remediationOf is the remediation remediate would run after a failure
// a cancelled readiness wait left: a rollback or an uninstall.
func remediationOf(req *Request) (Step, string) {
	rem := req.Object.GetActiveRemediation()
	switch {
	case rem == nil:
		return StepNone, "no remediation configured; an upgrade follows when something changes"
	case req.Object.RetriesExhausted(rem) && !rem.MustRemediateLastFailure():
		return StepNone, "retries exhausted"
	}
	why := "remediation of the failed " + string(req.Object.Status.LastAttemptedReleaseAction)
	switch req.Object.Status.LastAttemptedReleaseAction {
	case helmv2.ReleaseActionInstall:
		return StepUninstall, why
	case helmv2.ReleaseActionUpgrade:
		if rem.GetStrategy() == helmv2.UninstallRemediationStrategy {
			return StepUninstall, why
		}
		return StepRollback, why
	}
	return StepNone, ""
}
