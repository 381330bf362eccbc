package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/ownrevision"
)

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

// ownMark is the mark of the action the machine starts now (see
// internal/ownrevision): it names the HelmRelease and the history's
// latest snapshot, which the status written when the action is announced
// holds. A revision it marks is recognised after a restart by the same
// status read back.
func ownMark(req *Request) ownrevision.Mark {
	obj := req.Object
	m := ownrevision.Mark{Owner: string(obj.UID)}
	if m.Owner == "" {
		// Only objects that never reached an API server (tests) have
		// no UID.
		m.Owner = obj.Namespace + "/" + obj.Name
	}
	if latest := obj.Status.History.Latest(); latest != nil {
		m.After = latest.Digest
	}
	return m
}

// ownRevision tells whether cur was made by an action of this
// HelmRelease started from the status as it is recorded: the mark on cur
// names its version, this HelmRelease and the history's latest snapshot.
// A revision made by hand with the helm CLI carries no mark, or the mark
// of the revision its labels were copied from, which names another
// version.
func ownRevision(req *Request, cur *releasev1.Release) bool {
	return ownMark(req).Marks(cur)
}

// unrecordedRollback returns the snapshot a release in storage rolled back
// to, when that release is a rollback of this controller's that Helm
// finished and whose controller stopped before writing it to the history:
// the revision right after the history's latest, marked as the
// controller's own (ownRevision), which followed a failure (this
// controller rolls back only to remediate one). Otherwise it returns nil:
// a rollback made by hand (of a healthy release or a failed one) is
// unmanaged and upgraded over, as upstream does.
func unrecordedRollback(req *Request, cur *releasev1.Release) *helmv2.Snapshot {
	latest := req.Object.Status.History.Latest()
	if latest == nil || cur == nil || cur.Info == nil || !latest.Targets(cur.Name, cur.Namespace, cur.Version-1) {
		return nil
	}
	if !remediable(latest) || cur.Info.RollbackRevision == 0 || !ownRevision(req, cur) {
		return nil
	}
	if cur.Info.Status != common.StatusDeployed && cur.Info.Status != common.StatusFailed {
		return nil
	}
	for _, s := range req.Object.Status.History {
		if s.Version == cur.Info.RollbackRevision {
			return s
		}
	}
	return nil
}

// remediable tells whether a snapshot is a failure a rollback could have
// remediated: a failed release, or one whose tests failed.
func remediable(s *helmv2.Snapshot) bool {
	return s.Status == common.StatusFailed.String() || s.HasTestInPhase(releasev1.HookPhaseFailed.String())
}

// unrecordedRelease tells whether cur is an install or upgrade of this
// controller's that Helm finished and whose controller stopped before
// writing it to the history: the deployed revision right after the
// history's latest, marked as the controller's own (ownRevision), made
// from the desired chart and values. Upgrading over it would only repeat
// it, hooks included. A revision made by hand with the helm CLI, even from
// the same chart and values, is not the controller's to record and is
// upgraded, as upstream does.
//
// For a first install the history is empty: the announce that preceded it
// cleared it and recorded the install as attempted. So it is for an
// upgrade that took over an unmanaged release (decideUnmanaged).
func unrecordedRelease(req *Request, cur *releasev1.Release) bool {
	if cur == nil || cur.Info == nil || cur.Info.Status != common.StatusDeployed || cur.Info.RollbackRevision != 0 {
		return false
	}
	status := req.Object.Status
	latest := status.History.Latest()
	switch {
	case latest == nil && status.LastAttemptedReleaseAction != "":
		// An install, or an upgrade taking over an unmanaged release,
		// which starts from an empty history.
	case latest != nil && latest.Targets(cur.Name, cur.Namespace, cur.Version-1):
	default:
		return false
	}
	return ownRevision(req, cur) && chartOrValuesChange(req, newSnapshot(req, cur, "")) == ""
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
