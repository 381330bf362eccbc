package reconcile

import (
	"context"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/afterhooks/helm-controller/internal/drift"
)

// Reasons for drift detection outcomes beyond the API's DriftDetected and
// NoDriftDetected. The names are upstream helm-controller's event reasons.
const (
	// DriftCorrectedReason: the drifted objects were applied again.
	DriftCorrectedReason = "DriftCorrected"
	// DriftCorrectionFailedReason: applying the drifted objects failed, or
	// they still differ afterwards.
	DriftCorrectionFailedReason = "DriftCorrectionFailed"
	// DriftDetectionFailedReason: the release could not be compared with
	// the cluster at all.
	DriftDetectionFailedReason = "DriftDetectionFailed"
)

// observeDrift refines an in-sync observation of cur: with
// spec.driftDetection in enabled or warn mode it compares the release's
// objects with the cluster and reports StateDrifted when any was deleted
// or changed. Drift is looked for nowhere else: a release being installed,
// upgraded, waited for or remediated is not in sync, and Helm applies
// every object anyway when it gets there.
func (m *Machine) observeDrift(ctx context.Context, req *Request, cur *releasev1.Release, inSync Observation) (Observation, jsondiff.DiffSet, error) {
	obj := req.Object
	if !obj.GetDriftDetection().MustDetectChanges() {
		// The condition only speaks for a release that is checked.
		conditions.Delete(obj, helmv2.DriftedCondition)
		return inSync, nil, nil
	}
	set, err := m.Helm.DetectDrift(ctx, cur)
	if err != nil && !set.HasChanges() {
		msg := fmt.Sprintf("Could not compare release %s with the cluster: %s", releaseID(cur), trimError(err))
		conditions.MarkUnknown(obj, helmv2.DriftedCondition, DriftDetectionFailedReason, "%s", msg)
		m.warning(req, obj.Status.History.Latest(), DriftDetectionFailedReason, msg)
		return inSync, nil, fmt.Errorf("%s", msg)
	}
	if err != nil {
		// What could be compared has drifted; act on that now and compare
		// the rest again next time.
		ctrl.LoggerFrom(ctx).Error(err, "some objects of the release could not be compared with the cluster", "release", releaseID(cur))
	}
	if !set.HasChanges() {
		conditions.MarkFalse(obj, helmv2.DriftedCondition, helmv2.NoDriftDetectedReason,
			"No drift: the objects of release %s match the cluster", releaseID(cur))
		return inSync, nil, nil
	}
	n, _ := drift.Count(set)
	return Observation{StateDrifted, fmt.Sprintf("%d object(s) of release %s drifted", n, releaseID(cur))}, set, nil
}

// driftMessage names the release and lists what drifted.
func driftMessage(cur *releasev1.Release, set jsondiff.DiffSet) string {
	return fmt.Sprintf("Cluster state of release %s differs from its manifest:\n%s", releaseID(cur), firstLines(drift.Describe(set), maxDriftLines))
}

// maxDriftLines bounds the objects a message lists: conditions and events
// have size limits, and a page of names says enough.
const maxDriftLines = 50

// firstLines keeps the first n lines of s and says how many were left out.
func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= n {
		return s
	}
	return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n… and %d more", len(lines)-n)
}

// drifted reports the drift in set (Drifted condition and event) and, in
// enabled mode, corrects it. It returns done when nothing is left to do in
// this reconcile: always in warn mode, which only reports.
func (m *Machine) drifted(ctx context.Context, req *Request, cur *releasev1.Release, set jsondiff.DiffSet) (bool, error) {
	obj := req.Object
	latest := obj.Status.History.Latest()
	msg := driftMessage(cur, set)
	conditions.MarkTrue(obj, helmv2.DriftedCondition, helmv2.DriftDetectedReason, "%s", msg)
	m.warning(req, latest, helmv2.DriftDetectedReason, msg)
	if obj.GetDriftDetection().GetMode() != helmv2.DriftDetectionEnabled {
		return true, nil
	}

	changes, err := m.Helm.CorrectDrift(ctx, set)
	applied := firstLines(drift.DescribeChanges(changes), maxDriftLines)
	if err != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "Drift correction of release %s failed: %s", releaseID(cur), trimError(err))
		if applied != "" {
			fmt.Fprintf(&b, "\nApplied before the failure:\n%s", applied)
		}
		conditions.MarkTrue(obj, helmv2.DriftedCondition, helmv2.DriftDetectedReason, "%s\n%s", msg, b.String())
		m.warning(req, latest, DriftCorrectionFailedReason, b.String())
		return true, &DriftNotCorrectedError{msg: b.String()}
	}
	if applied == "" {
		applied = "nothing needed applying"
	}
	m.normal(req, latest, DriftCorrectedReason, fmt.Sprintf("Corrected the drift of release %s:\n%s", releaseID(cur), applied))
	// The machine looks again; what the correction could not restore
	// shows up as drift once more (see driftPersists).
	return false, nil
}

// driftPersists ends a reconcile in which a correction ran and the objects
// still differ, typically because another controller or a mutating webhook
// writes the same fields. Correcting again at once, or on a fast backoff,
// would only fight it: the drift is reported (Ready turns Unknown, see
// summarize) and the next correction waits for the next interval. An
// ignore rule for those fields ends the fight.
func (m *Machine) driftPersists(req *Request, cur *releasev1.Release, set jsondiff.DiffSet) error {
	msg := fmt.Sprintf("%s\nThe objects still differ after a correction; if another controller manages these fields, add drift detection ignore rules for them",
		driftMessage(cur, set))
	conditions.MarkTrue(req.Object, helmv2.DriftedCondition, helmv2.DriftDetectedReason, "%s", msg)
	m.warning(req, req.Object.Status.History.Latest(), DriftCorrectionFailedReason, msg)
	return nil
}

// DriftNotCorrectedError is a drift correction that failed. As upstream,
// it leaves Ready Unknown (the release itself is as it was: the drift
// correction is still in progress) instead of False, so that it reads as
// a retry, not as a failed release; the reconcile is retried with backoff.
type DriftNotCorrectedError struct{ msg string }

func (e *DriftNotCorrectedError) Error() string { return e.msg }

// uncorrectedDrift returns what keeps a release that is otherwise Ready
// from being Ready: drift that could not be checked (Ready False, as it
// is a failure to reconcile), or that enabled mode could not correct
// (Ready Unknown with reason Progressing, as upstream's: the correction is
// retried). Drift in warn mode is only reported, as upstream does.
func uncorrectedDrift(req *Request) (status metav1.ConditionStatus, reason, message string, found bool) {
	c := conditions.Get(req.Object, helmv2.DriftedCondition)
	switch {
	case c == nil:
		return "", "", "", false
	case c.Status == metav1.ConditionUnknown:
		return metav1.ConditionFalse, c.Reason, c.Message, true
	case c.Status == metav1.ConditionTrue && req.Object.GetDriftDetection().GetMode() == helmv2.DriftDetectionEnabled:
		return metav1.ConditionUnknown, meta.ProgressingReason,
			"Drift correction in progress, retried: " + c.Message, true
	}
	return "", "", "", false
}
