package reconcile

import (
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
)

// State is what a reconcile observes about a release before it acts.
type State string

const (
	// StateAbsent: nothing in storage, or only an uninstalled release.
	StateAbsent State = "Absent"
	// StateUnmanaged: a release in storage that status.history does not
	// describe, e.g. installed by hand or with another status writer.
	StateUnmanaged State = "Unmanaged"
	// StateLocked: the release is pending-install/upgrade/rollback and no
	// action of ours is running on it.
	StateLocked State = "Locked"
	// StateUninstalling: an uninstall (a remediation: a deleted
	// HelmRelease takes another path) was cut short by a stop of the
	// controller; Helm left the release "uninstalling", or Helm's part
	// was over and the deletion of what the hooks left was not
	// (spec.uninstall.deleteHookResources, see internal/hookcleanup).
	StateUninstalling State = "Uninstalling"
	// StateAwaitingReadiness: an afterHooks action ran its hooks and left
	// the revision pending for its readiness wait, which an earlier run of
	// the controller did not finish (it stopped or lost leadership).
	StateAwaitingReadiness State = "AwaitingReadiness"
	// StateFailed: the last action failed (in Helm, or its tests).
	StateFailed State = "Failed"
	// StateOutOfSync: the chart, values, post renderers, common metadata or
	// a force request differ from what the release was made from.
	StateOutOfSync State = "OutOfSync"
	// StateUntested: tests are enabled and have not run on this release.
	StateUntested State = "Untested"
	// StateInSync: nothing to do.
	StateInSync State = "InSync"
	// StateDrifted: in sync, but objects of the release differ from its
	// manifest in the cluster. Only drift detection (drift.go) reports it,
	// refining StateInSync.
	StateDrifted State = "Drifted"
)

// Observation is a State with the reason for it, in words for a user.
type Observation struct {
	State  State
	Reason string
}

// Observe decides the state of the release cur (nil when storage has
// none) against the desired state in req. It reads and changes nothing.
func Observe(req *Request, cur *releasev1.Release) Observation {
	if cur == nil {
		return Observation{StateAbsent, "no release in storage"}
	}
	if cur.Info == nil {
		return Observation{StateUnmanaged, fmt.Sprintf("release %s has no status information", releaseID(cur))}
	}
	status := cur.Info.Status
	if awaiting, deadline := afterhooks.IsAwaitingReadiness(cur); awaiting {
		return Observation{StateAwaitingReadiness, fmt.Sprintf("release %s is %s, waiting for readiness until %s (afterHooks)",
			releaseID(cur), status, deadline.UTC().Format(time.RFC3339))}
	}
	if status.IsPending() {
		return Observation{StateLocked, fmt.Sprintf("release %s is %s", releaseID(cur), status)}
	}
	if status == common.StatusUninstalling {
		return Observation{StateUninstalling, fmt.Sprintf("release %s is still being uninstalled", releaseID(cur))}
	}
	if hookcleanup.Pending(cur) {
		// An uninstall that stopped between Helm's part and the deletion
		// of what the hooks left: it is not over until that is done.
		return Observation{StateUninstalling, fmt.Sprintf("release %s is uninstalled, but the objects its hooks left are still to be deleted", releaseID(cur))}
	}
	if status == common.StatusUninstalled {
		return Observation{StateAbsent, fmt.Sprintf("release %s is uninstalled", releaseID(cur))}
	}

	latest := req.Object.Status.History.Latest()
	if latest == nil || !latest.Targets(cur.Name, cur.Namespace, cur.Version) {
		return Observation{StateUnmanaged, fmt.Sprintf("release %s is not the one the HelmRelease's history records", releaseID(cur))}
	}
	if status == common.StatusFailed {
		return Observation{StateFailed, fmt.Sprintf("release %s failed", releaseID(cur))}
	}
	if status != common.StatusDeployed {
		return Observation{StateUnmanaged, fmt.Sprintf("release %s is %s", releaseID(cur), status)}
	}

	if reason := outOfSyncReason(req, latest, cur); reason != "" {
		return Observation{StateOutOfSync, reason}
	}

	test := req.Object.GetTest()
	if test.Enable {
		if !latest.HasBeenTested() {
			return Observation{StateUntested, fmt.Sprintf("release %s has not been tested", releaseID(cur))}
		}
		if latest.HasTestInPhase("Failed") && !ignoreTestFailures(req) {
			return Observation{StateFailed, fmt.Sprintf("tests of release %s failed", releaseID(cur))}
		}
	}
	return Observation{StateInSync, fmt.Sprintf("release %s is in sync", releaseID(cur))}
}

func outOfSyncReason(req *Request, latest *helmv2.Snapshot, cur *releasev1.Release) string {
	if req.Force {
		return "a release was forced"
	}
	if reason := chartOrValuesChange(req, latest); reason != "" {
		// A chart served under a version that only gained or lost the
		// digest's build metadata (its chart template switched between
		// HelmChart and OCIRepository) is not a new chart.
		if !onlyBuildMetadataChanged(req, latest) || !sameChart(req, cur) {
			return reason
		}
	}
	return postRenderChange(req)
}

// chartOrValuesChange says how the chart or the values of req differ from
// those the revision s was made with, or "" when they do not.
func chartOrValuesChange(req *Request, s *helmv2.Snapshot) string {
	md := req.Chart.Metadata()
	switch {
	case s.ChartName != md.Name:
		return fmt.Sprintf("chart changed from %s to %s", s.ChartName, md.Name)
	case s.ChartVersion != md.Version:
		return fmt.Sprintf("chart version changed from %s to %s", s.ChartVersion, md.Version)
	case !req.valuesMatch(s.ConfigDigest):
		return "values changed"
	}
	return ""
}

// ignoreTestFailures tells whether failed tests leave the release as is:
// as upstream, the active remediation's ignoreTestFailures when set, else
// spec.test.ignoreFailures. An explicit false on the remediation counts
// failed tests even when the test spec ignores them.
func ignoreTestFailures(req *Request) bool {
	ignore := req.Object.GetTest().IgnoreFailures
	if r := req.Object.GetActiveRemediation(); r != nil {
		return r.MustIgnoreTestFailures(ignore)
	}
	return ignore
}

func releaseID(rel *releasev1.Release) string {
	return fmt.Sprintf("%s/%s.v%d", rel.Namespace, rel.Name, rel.Version)
}
