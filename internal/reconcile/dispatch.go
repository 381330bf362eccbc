package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// maxSteps bounds the actions of one reconcile. A full path is unlock,
// upgrade, test: far below it. Reaching it means the machine is cycling.
const maxSteps = 10

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
		if obs.State == StateInSync || obs.State == StateUntested {
			rolledBackInSync(req)
		}
		if obs.State == StateInSync {
			cutHistory(req)
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
				m.beforeChange()
				done, err := m.drifted(ctx, req, cur, set)
				if err != nil || done {
					return err
				}
				continue
			}
		}
		if obs.State != StateInSync {
			m.beforeChange()
		}
		done, err := m.step(ctx, req, cur, obs)
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("release did not settle after %d actions; last state was not in sync", maxSteps)
}

// step carries out the step decide picks for the observation obs of cur.
// It returns true when the reconcile ends here, with the error it ends
// with; false to observe the release again and go on, unless the error is
// not nil.
func (m *Machine) step(ctx context.Context, req *Request, cur *releasev1.Release, obs Observation) (bool, error) {
	n := decide(req, cur, obs)
	if n.canceledWait != nil {
		// Whatever remediation n.Step names, failed runs it (remediate
		// makes the same choice), or ends the reconcile with the failure
		// when there is none to run.
		return true, m.failed(ctx, req, n.canceledWait)
	}
	switch n.Step {
	case StepNone:
		return true, n.end
	case StepInstall:
		return false, m.failed(ctx, req, m.install(ctx, req))
	case StepUpgrade:
		return false, m.failed(ctx, req, m.upgradeFrom(ctx, req, n.State))
	case StepTest:
		return false, m.failed(ctx, req, m.test(ctx, req))
	case StepUnlock:
		return false, m.unlockFor(ctx, req, cur, n.staleHeld)
	case StepResume:
		return m.resumeHeld(ctx, req, cur)
	case StepRollback:
		return true, m.finishRollback(ctx, req)
	case StepUninstall:
		return true, m.finishUninstall(ctx, req)
	case StepRecord:
		return m.recordUnrecorded(ctx, req, cur, n.rollbackTarget)
	}
	return true, fmt.Errorf("no way to carry out step %q (release state %q)", n.Step, n.State)
}

// upgradeFrom runs the upgrade decide picked for a release in the state
// from. A release taken over (StateUnmanaged) starts from a cleared
// history, which no longer describes it; a failed one retried under
// RetryOnFailure from a history cut as upstream cuts it.
func (m *Machine) upgradeFrom(ctx context.Context, req *Request, from State) error {
	switch from {
	case StateUnmanaged:
		req.Object.Status.ClearHistory()
	case StateFailed:
		if req.Object.GetActiveRetry(req.DefaultToRetryOnFailure) != nil {
			cutHistory(req)
		}
	}
	return m.upgrade(ctx, req)
}

// unlockFor marks cur, a release left pending, as failed. A revision
// held for its readiness wait is released so when it is not the desired
// state any more (stale says how it changed): not charged to the new
// attempt, with an event saying why, and superseded by the new revision.
func (m *Machine) unlockFor(ctx context.Context, req *Request, cur *releasev1.Release, stale string) error {
	if stale != "" {
		m.normal(req, nil, pendingReleaseReason, fmt.Sprintf(
			"Release %s was held for its readiness wait by an earlier run, but the desired state changed since (%s); the new revision supersedes it",
			releaseID(cur), stale))
	}
	return m.unlock(ctx, req, cur)
}

// resumeHeld finishes the readiness wait of a revision an earlier run
// held pending.
func (m *Machine) resumeHeld(ctx context.Context, req *Request, cur *releasev1.Release) (bool, error) {
	pending := cur.Info.Status
	err := m.resume(ctx, req, cur)
	if pending == common.StatusPendingRollback {
		// A rollback is itself the remediation: whatever its outcome,
		// this reconcile ends here, as after any remediation.
		return true, err
	}
	return false, m.failed(ctx, req, err)
}

// recordUnrecorded writes to the status what Helm finished before a stop
// of the controller: a rollback (to rollbackTarget), which ends the
// reconcile as that remediation would have, or an install or upgrade,
// after which the reconcile goes on.
func (m *Machine) recordUnrecorded(ctx context.Context, req *Request, cur *releasev1.Release, rollbackTarget *helmv2.Snapshot) (bool, error) {
	if rollbackTarget != nil {
		return true, m.recordUnrecordedRollback(ctx, req, cur, rollbackTarget)
	}
	m.recordUnrecordedRelease(req, cur)
	return false, nil
}
