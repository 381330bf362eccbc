package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// pendingReleaseReason is upstream's reason for unlocking a release left
// pending, in the Released condition and the events.
const pendingReleaseReason = "PendingRelease"

// unlock releases a release left pending by an action that never finished
// (the controller stopped mid-action). Helm would refuse any new action on
// it; marking it failed lets remediation or the next upgrade take over.
// Reported as upstream reports it: Released=False PendingRelease and a
// Normal event, a Warning one when storage cannot be written.
func (m *Machine) unlock(ctx context.Context, req *Request, cur *releasev1.Release) error {
	pending := cur.Info.Status
	// Record the revision as failed, so the next step retries the action
	// that was interrupted (install over a failed install, upgrade over a
	// failed upgrade) without counting a failure for the restart.
	action := helmv2.ReleaseActionUpgrade
	switch pending {
	case common.StatusPendingInstall:
		action = helmv2.ReleaseActionInstall
	case common.StatusPendingRollback:
		action = helmv2.ReleaseActionRollback
	}
	if err := m.Helm.Unlock(ctx, cur); err != nil {
		s := newSnapshot(req, cur, action)
		msg := fmt.Sprintf("Unlock of Helm release %s in %s state failed: %v", describeRelease(s), pending, err)
		countFailure(ctx, req)
		conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, pendingReleaseReason, "%s", msg)
		m.warning(req, s, pendingReleaseReason, msg)
		return fmt.Errorf("%s", msg)
	}
	s := recordSnapshot(req, cur, action)
	if action != helmv2.ReleaseActionRollback {
		req.Object.Status.LastAttemptedReleaseAction = action
	}
	msg := fmt.Sprintf("Unlocked Helm release %s in %s state", describeRelease(s), pending)
	conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, pendingReleaseReason, "%s", msg)
	m.normal(req, s, pendingReleaseReason, msg)
	return nil
}
