package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// rollback returns the release to the last successful revision in the
// history.
func (m *Machine) rollback(ctx context.Context, req *Request) error {
	prev := req.Object.Status.History.Previous(ignoreTestFailures(req))
	if prev == nil {
		msg := "Helm rollback impossible: the history holds no earlier successful release"
		countFailure(ctx, req)
		conditions.MarkFalse(req.Object, helmv2.RemediatedCondition, helmv2.RollbackFailedReason, "%s", msg)
		m.warning(req, req.Object.Status.History.Latest(), helmv2.RollbackFailedReason, msg)
		return errors.New(msg)
	}
	target := describeRelease(prev)
	m.announce(req, helmverb.Rollback, req.Object.GetRollback().GetTimeout(req.Object.GetTimeout()), false)
	err := m.Helm.Rollback(ctx, prev.Version, ownMark(req))
	if rel := m.Helm.LastWritten(); rel != nil && rel.Version != req.Object.Status.History.Latest().Version {
		recordSnapshot(req, rel, helmv2.ReleaseActionRollback)
	}
	latest := req.Object.Status.History.Latest()
	if err != nil && ctx.Err() != nil {
		// Interrupted (the controller stops), not failed: under afterHooks
		// the revision stays pending and the next run resumes its wait.
		return fmt.Errorf("Helm rollback to previous release %s interrupted: %w", target, err)
	}
	var canceled *HealthCheckCanceledError
	if errors.As(err, &canceled) {
		// Abandoned for a new desired state, which the next reconcile,
		// already queued, works on.
		msg := fmt.Sprintf("Helm rollback to previous release %s canceled: %s", target, canceled)
		conditions.MarkFalse(req.Object, helmv2.RemediatedCondition, meta.HealthCheckCanceledReason, "%s", msg)
		m.normal(req, latest, meta.HealthCheckCanceledReason, msg)
		return canceled
	}
	return m.reportRollback(ctx, req, latest, target, err)
}

// reportRollback records how the rollback to target that wrote latest
// ended: Remediated, its event and, on failure, the failure count.
func (m *Machine) reportRollback(ctx context.Context, req *Request, latest *helmv2.Snapshot, target string, err error) error {
	if err != nil {
		msg := fmt.Sprintf("Helm rollback to previous release %s failed: %s", target, trimError(err))
		countFailure(ctx, req)
		conditions.MarkFalse(req.Object, helmv2.RemediatedCondition, helmv2.RollbackFailedReason, "%s", msg)
		m.warning(req, latest, helmv2.RollbackFailedReason, msg)
		return errors.New(msg)
	}
	markPreviousSuperseded(req, latest)
	msg := fmt.Sprintf("Helm rollback to previous release %s succeeded", target)
	conditions.MarkTrue(req.Object, helmv2.RemediatedCondition, helmv2.RollbackSucceededReason, "%s", msg)
	m.normal(req, latest, helmv2.RollbackSucceededReason, msg)
	return nil
}
