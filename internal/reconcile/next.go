package reconcile

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Step names the first thing a reconcile does about a release, as Next
// predicts it.
type Step string

const (
	// StepNone: the release is in sync, or the retries are used up.
	StepNone Step = "none"
	// StepInstall, StepUpgrade, StepTest, StepRollback and StepUninstall
	// run the Helm action of the same name.
	StepInstall   Step = "install"
	StepUpgrade   Step = "upgrade"
	StepTest      Step = "test"
	StepRollback  Step = "rollback"
	StepUninstall Step = "uninstall"
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

// Next is what the next reconcile would start with, and why.
type Next struct {
	Observation
	Step Step
	// Why adds to the observation's reason what picked the step (a
	// remediation strategy, used-up retries); may be empty.
	Why string
}

// Predict returns the step Run takes first for the release cur (nil: none
// in storage) and req: the same observation and the same predicates as
// step, without acting. Drift (spec.driftDetection) is not predicted: it
// needs the cluster.
func Predict(req *Request, cur *releasev1.Release) Next {
	req = withAttemptTracked(req)
	obs := Observe(req, cur)
	n := Next{Observation: obs, Step: StepNone}
	switch obs.State {
	case StateAbsent:
		n.Step, n.Why = guarded(req, helmv2.ReleaseActionInstall, StepInstall)
	case StateUnmanaged, StateOutOfSync:
		n.Step, n.Why = predictOutOfSync(req, cur, obs)
	case StateLocked:
		n.Step = StepUnlock
	case StateUninstalling:
		n.Step = StepUninstall
	case StateAwaitingReadiness:
		n.Step = StepResume
		if reason := staleHeldRevision(req, cur); reason != "" {
			n.Step, n.Why = StepUnlock, "the desired state changed since the revision was held: "+reason
		}
	case StateUntested:
		n.Step = StepTest
	case StateFailed:
		n.Step, n.Why = predictFailed(req)
	}
	return n
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

func predictOutOfSync(req *Request, cur *releasev1.Release, obs Observation) (Step, string) {
	if obs.State != StateUnmanaged {
		return guarded(req, helmv2.ReleaseActionUpgrade, StepUpgrade)
	}
	if unrecordedRollback(req, cur) != nil || unrecordedRelease(req, cur) {
		return StepRecord, "Helm finished the action before the controller recorded it"
	}
	return StepUpgrade, "the release was not made by this HelmRelease (no mark of its own): it is taken over"
}

func predictFailed(req *Request) (Step, string) {
	if interruptedRollback(req) {
		return StepRollback, "a rollback remediating a failed upgrade was interrupted"
	}
	if err := canceledWaitFailure(req); err != nil {
		return remediationOf(req)
	}
	step, why := guarded(req, req.Object.Status.LastAttemptedReleaseAction, StepUpgrade)
	if err := unremediableFailure(req); step == StepUpgrade && err != nil {
		return StepNone, err.Error()
	}
	return step, why
}

// guarded is step unless the retries of action are used up.
func guarded(req *Request, action helmv2.ReleaseAction, step Step) (Step, string) {
	if err := retriesExhausted(req, action); err != nil {
		return StepNone, err.Error()
	}
	return step, ""
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
