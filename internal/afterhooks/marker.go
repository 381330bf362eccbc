package afterhooks

import (
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

const (
	markerPrefix    = "Waiting for resources to become ready (afterHooks, deadline "
	markerDeadline  = ")"
	markerOnSuccess = "; on success: "
)

// marker is what the description of a held revision says.
type marker struct {
	// deadline is when the readiness wait times out.
	deadline time.Time
	// onSuccess is the description Helm wanted to record ("Install
	// complete", "Upgrade complete", "Rollback to 3", or the action's
	// Description option).
	onSuccess string
}

func (m marker) String() string {
	s := markerPrefix + m.deadline.UTC().Format(time.RFC3339) + markerDeadline
	if m.onSuccess != "" {
		s += markerOnSuccess + m.onSuccess
	}
	return s
}

// parseMarker reads a marker description; ok is false for any other text.
func parseMarker(desc string) (marker, bool) {
	rest, ok := strings.CutPrefix(desc, markerPrefix)
	if !ok {
		return marker{}, false
	}
	ts, rest, ok := strings.Cut(rest, markerDeadline)
	if !ok {
		return marker{}, false
	}
	deadline, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return marker{}, false
	}
	// We only write whole UTC seconds, but an edited marker may carry an
	// offset or a fraction: read it as the marker String would write, so
	// that what a restarted controller holds is what it would record. A
	// year String cannot render in RFC 3339 (an offset can push 9999 or 0
	// over the edge) is not a deadline we could have written.
	deadline = deadline.UTC().Truncate(time.Second)
	if y := deadline.Year(); y < 0 || y > 9999 {
		return marker{}, false
	}
	m := marker{deadline: deadline}
	if rest == "" {
		return m, true
	}
	if m.onSuccess, ok = strings.CutPrefix(rest, markerOnSuccess); !ok {
		return marker{}, false
	}
	return m, true
}

// IsAwaitingReadiness tells whether rel is a revision this package left
// pending after its post hooks ran, waiting for its resources to become
// ready; deadline is when that wait times out (it may have passed).
//
// A reconciler that finds such a revision as the latest one must not run
// the Helm action again (its hooks already ran) nor unlock it as an
// interrupted action: it resumes the wait with WaitReady for
// ResumeTimeout(deadline, now, timeout) and finishes with Recover(...).Commit or
// Fail. A pending revision without the marker was left by an interrupted
// Helm action (or by a failed post-rollback hook) and is not ours.
func IsAwaitingReadiness(rel *releasev1.Release) (bool, time.Time) {
	if rel == nil || rel.Info == nil || !isPendingAction(rel.Info.Status) {
		return false, time.Time{}
	}
	m, ok := parseMarker(rel.Info.Description)
	if !ok {
		return false, time.Time{}
	}
	return true, m.deadline
}

// MinResumeWait is the shortest wait ResumeTimeout returns: a revision whose
// deadline passed while no controller was running still gets one short
// look at its resources before it is failed.
const MinResumeWait = 15 * time.Second

// ResumeTimeout is the timeout for a resumed wait: what is left until
// deadline, but at least MinResumeWait and, when limit is positive (the
// action's timeout), at most limit: no wait outlasts a fresh one, whatever
// the recorded deadline says (clock skew between nodes, an edited marker).
func ResumeTimeout(deadline, now time.Time, limit time.Duration) time.Duration {
	left := deadline.Sub(now)
	if limit > 0 && left > limit {
		left = limit
	}
	if left > MinResumeWait {
		return left
	}
	return MinResumeWait
}

func isPendingAction(s common.Status) bool {
	switch s {
	case common.StatusPendingInstall, common.StatusPendingUpgrade, common.StatusPendingRollback:
		return true
	}
	return false
}
