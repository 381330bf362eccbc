package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// resume finishes the readiness wait of an afterHooks action that an
// earlier run of the controller started: the hooks ran then, so only the
// wait is left. The outcome is recorded as the action's own (install,
// upgrade or rollback), and a failed wait is remediated like any other.
// If this run is interrupted too, the revision stays pending for the next.
func (m *Machine) resume(ctx context.Context, req *Request, cur *releasev1.Release) error {
	pending := cur.Info.Status
	rel, err := m.Helm.ResumeWait(ctx, cur)
	if rel == nil && err != nil {
		return &notRecordedError{err: fmt.Errorf("resuming the readiness wait of release %s: %w", releaseID(cur), err)}
	}

	if pending == common.StatusPendingRollback {
		return m.recordResumedRollback(ctx, req, rel, err)
	}
	action := helmv2.ReleaseActionInstall
	if pending == common.StatusPendingUpgrade {
		action = helmv2.ReleaseActionUpgrade
	}
	req.Object.Status.LastAttemptedReleaseAction = action
	st := &req.Object.Status
	postRenderers, commonMetadata := st.ObservedPostRenderersDigest, st.ObservedCommonMetadataDigest
	err = m.recordRelease(ctx, req, action, rel, err)
	if req.specChanged {
		// The revision was rendered with the post renderers and common
		// metadata of an earlier spec, which the status does not keep:
		// recording the current spec's would hide a change to them, so
		// the previous observation stays and any change is upgraded to.
		st.ObservedPostRenderersDigest, st.ObservedCommonMetadataDigest = postRenderers, commonMetadata
	}
	return err
}

// recordResumedRollback records a rollback whose wait finished after a
// restart as the rollback would have, naming the revision it rolled back to:
// the previous successful one, which the rollback chose by the same rule
// (the rollback's own revision, recorded or not, is never that one).
func (m *Machine) recordResumedRollback(ctx context.Context, req *Request, rel *releasev1.Release, err error) error {
	target := describeRelease(req.Object.Status.History.Previous(ignoreTestFailures(req)))
	var s *helmv2.Snapshot
	if rel != nil && m.stored(rel) {
		s = recordSnapshot(req, rel, helmv2.ReleaseActionRollback)
	}
	return m.reportRollback(ctx, req, s, target, err)
}
