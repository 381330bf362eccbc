package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// unlock releases a release left pending by an action that never finished
// (the controller stopped mid-action). Helm would refuse any new action on
// it; marking it failed lets remediation or the next upgrade take over.
func (m *Machine) unlock(ctx context.Context, req *Request, cur *releasev1.Release) error {
	pending := cur.Info.Status
	if err := m.Helm.Unlock(ctx, cur); err != nil {
		return fmt.Errorf("unlocking release %s left %s: %w", releaseID(cur), pending, err)
	}
	reason := helmv2.UpgradeFailedReason
	switch pending {
	case common.StatusPendingInstall:
		reason = helmv2.InstallFailedReason
	case common.StatusPendingRollback:
		reason = helmv2.RollbackFailedReason
	}
	msg := fmt.Sprintf("release %s was left %s by an interrupted action and is now marked failed", releaseID(cur), pending)
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
	if action != helmv2.ReleaseActionRollback {
		req.Object.Status.LastAttemptedReleaseAction = action
	}
	recordSnapshot(req, cur, action)
	if reason == helmv2.RollbackFailedReason {
		conditions.MarkFalse(req.Object, helmv2.RemediatedCondition, reason, "%s", msg)
	} else {
		conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, reason, "%s", msg)
	}
	m.warning(req, req.Object.Status.History.Latest(), reason, msg)
	return nil
}
