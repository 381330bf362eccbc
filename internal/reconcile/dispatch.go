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

// step runs the action the observed state calls for. It returns true when
// the reconcile ends here, with the error it ends with; false to observe
// the release again and go on, unless the error is not nil.
func (m *Machine) step(ctx context.Context, req *Request, cur *releasev1.Release, obs Observation) (bool, error) {
	switch obs.State {
	case StateInSync:
		return true, nil
	case StateAbsent:
		return m.stepAbsent(ctx, req)
	case StateUnmanaged, StateOutOfSync:
		return m.stepOutOfSync(ctx, req, cur, obs)
	case StateLocked:
		return false, m.unlock(ctx, req, cur)
	case StateUninstalling:
		return true, m.finishUninstall(ctx, req)
	case StateAwaitingReadiness:
		return m.stepAwaitingReadiness(ctx, req, cur)
	case StateUntested:
		return false, m.failed(ctx, req, m.test(ctx, req))
	case StateFailed:
		return m.stepFailed(ctx, req)
	}
	return true, fmt.Errorf("unknown release state %q", obs.State)
}

// stepAbsent installs the release, unless earlier installs used up their
// retries.
func (m *Machine) stepAbsent(ctx context.Context, req *Request) (bool, error) {
	if err := m.checkRetries(req, helmv2.ReleaseActionInstall); err != nil {
		return true, err
	}
	return false, m.failed(ctx, req, m.install(ctx, req))
}

// stepOutOfSync handles a release that is out of sync or unmanaged: an
// unmanaged one may be a rollback, install or upgrade of the controller's
// own that Helm finished before a stop of the controller, which is
// recorded instead of repeated (see ownRevision). Otherwise the release is
// upgraded. (A chart renamed under chartNameChangeStrategy Reinstall never
// gets here: the controller uninstalls the release first, see
// TargetChanged.)
func (m *Machine) stepOutOfSync(ctx context.Context, req *Request, cur *releasev1.Release, obs Observation) (bool, error) {
	if obs.State == StateUnmanaged {
		return m.stepUnmanaged(ctx, req, cur)
	}
	if err := m.checkRetries(req, helmv2.ReleaseActionUpgrade); err != nil {
		return true, err
	}
	return false, m.failed(ctx, req, m.upgrade(ctx, req))
}

// stepUnmanaged records what the controller itself made and did not
// record; any other release it did not make (by hand with the helm CLI, by
// another tool) is taken over as upstream does: the history, which no
// longer describes the release, is cleared, and the release upgraded
// whatever retries earlier upgrades used up, as those were of revisions
// that are not the release any more.
func (m *Machine) stepUnmanaged(ctx context.Context, req *Request, cur *releasev1.Release) (bool, error) {
	if target := unrecordedRollback(req, cur); target != nil {
		return true, m.recordUnrecordedRollback(ctx, req, cur, target)
	}
	if unrecordedRelease(req, cur) {
		m.recordUnrecordedRelease(req, cur)
		return false, nil
	}
	req.Object.Status.ClearHistory()
	return false, m.failed(ctx, req, m.upgrade(ctx, req))
}

// stepAwaitingReadiness finishes the readiness wait of a revision an
// earlier run held pending, or releases the revision when the desired
// state changed since.
func (m *Machine) stepAwaitingReadiness(ctx context.Context, req *Request, cur *releasev1.Release) (bool, error) {
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
}

// stepFailed handles a release whose last action failed: it finishes an
// interrupted rollback, remediates a failure a cancelled readiness wait
// left to this reconcile, or retries the action that failed.
func (m *Machine) stepFailed(ctx context.Context, req *Request) (bool, error) {
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
	// reset by a new attempt) is retried, as upstream does, with an
	// upgrade over the failed revision, a failed first install included:
	// upgrade hooks, Upgrade* reasons, and upgrade remediation from then
	// on. A release is installed afresh only when nothing of it is left
	// (StateAbsent), e.g. after an uninstall remediation.
	// The retries that count are those of the action that failed.
	if err := m.checkRetries(req, req.Object.Status.LastAttemptedReleaseAction); err != nil {
		return true, err
	}
	if err := unremediableFailure(req); err != nil {
		return true, err
	}
	if req.Object.GetActiveRetry(req.DefaultToRetryOnFailure) != nil {
		cutHistory(req)
	}
	return false, m.failed(ctx, req, m.release(ctx, req, helmv2.ReleaseActionUpgrade))
}
