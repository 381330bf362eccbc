package reconcile

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// summarize sets Ready from the release and drift conditions once the release is in
// sync: a remediation in place or failed tests (not ignored) keep it
// False; otherwise the latest of test and release outcome speaks for it.
func summarize(req *Request) {
	summarizeRelease(req)
	// Drift that could not be checked or corrected keeps a release that
	// is otherwise Ready from being Ready; failures of the release itself
	// speak first.
	status, reason, msg, found := uncorrectedDrift(req)
	switch {
	case !found || !conditions.IsTrue(req.Object, meta.ReadyCondition):
	case status == metav1.ConditionUnknown:
		conditions.MarkUnknown(req.Object, meta.ReadyCondition, reason, "%s", msg)
	default:
		conditions.MarkFalse(req.Object, meta.ReadyCondition, reason, "%s", msg)
	}
}

// summarizeRelease sets Ready from the outcome of the release actions.
func summarizeRelease(req *Request) {
	obj := req.Object
	// Tests turned off take their last result with them, as upstream: a
	// failed test no longer holds the release back.
	if !obj.GetTest().Enable {
		conditions.Delete(obj, helmv2.TestSuccessCondition)
	}
	rem := conditions.Get(obj, helmv2.RemediatedCondition)
	if rem != nil && !uninstallRemediation(rem) {
		conditions.MarkFalse(obj, meta.ReadyCondition, rem.Reason, "%s", rem.Message)
		return
	}
	outcome := releaseOutcome(req)
	if outcome == nil {
		conditions.MarkTrue(obj, meta.ReadyCondition, meta.SucceededReason, "release %s is in sync", req.releaseName())
		return
	}
	if rem != nil && outcome.Status == metav1.ConditionTrue {
		// An uninstalled release is never Ready, whatever came before.
		conditions.MarkFalse(obj, meta.ReadyCondition, rem.Reason, "%s", rem.Message)
		return
	}
	switch outcome.Status {
	case metav1.ConditionTrue:
		conditions.MarkTrue(obj, meta.ReadyCondition, outcome.Reason, "%s", outcome.Message)
	case metav1.ConditionUnknown:
		// Tests awaited: the release is neither good nor bad yet.
		conditions.MarkUnknown(obj, meta.ReadyCondition, outcome.Reason, "%s", outcome.Message)
	default:
		conditions.MarkFalse(obj, meta.ReadyCondition, outcome.Reason, "%s", outcome.Message)
	}
}

// releaseOutcome is the condition that speaks for the release: as
// upstream, the tests when their failures count (spec.test.ignoreFailures
// unset), otherwise the last release action. Nil when neither ran.
func releaseOutcome(req *Request) *metav1.Condition {
	obj := req.Object
	if test := conditions.Get(obj, helmv2.TestSuccessCondition); test != nil && !obj.GetTest().IgnoreFailures {
		return test
	}
	return conditions.Get(obj, helmv2.ReleasedCondition)
}

// uninstallRemediation tells whether the Remediated condition reports an
// uninstall. Upstream never summarizes after one, so Ready keeps the failed
// install or upgrade that caused it: the uninstall is what was done about
// the failure, not its cause, and alerts key on the cause. A rollback is
// different: it changed what runs, so Ready names it, as upstream's does.
func uninstallRemediation(rem *metav1.Condition) bool {
	return rem.Reason == helmv2.UninstallSucceededReason || rem.Reason == helmv2.UninstallFailedReason
}
