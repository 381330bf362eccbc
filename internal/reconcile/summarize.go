package reconcile

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
)

// summarize sets Ready from the release and drift conditions once the release is in
// sync: a remediation in place or failed tests (not ignored) keep it
// False; otherwise the latest of test and release outcome speaks for it.
func summarize(req *Request) {
	summarizeRelease(req)
	// Drift that could not be checked or corrected keeps a release that
	// is otherwise Ready from being Ready; failures of the release itself
	// speak first.
	if reason, msg, found := uncorrectedDrift(req); found && conditions.IsTrue(req.Object, meta.ReadyCondition) {
		conditions.MarkFalse(req.Object, meta.ReadyCondition, reason, "%s", msg)
	}
}

// summarizeRelease sets Ready from the outcome of the release actions.
func summarizeRelease(req *Request) {
	obj := req.Object
	if rem := conditions.Get(obj, helmv2.RemediatedCondition); rem != nil {
		conditions.MarkFalse(obj, meta.ReadyCondition, rem.Reason, "%s", rem.Message)
		return
	}
	// As upstream: tests speak for Ready only when their failures count
	// (spec.test.ignoreFailures unset); otherwise the release does.
	if test := conditions.Get(obj, helmv2.TestSuccessCondition); test != nil && !req.Object.Upstream().GetTest().IgnoreFailures {
		if test.Status == "True" {
			conditions.MarkTrue(obj, meta.ReadyCondition, test.Reason, "%s", test.Message)
			return
		}
		conditions.MarkFalse(obj, meta.ReadyCondition, test.Reason, "%s", test.Message)
		return
	}
	if rel := conditions.Get(obj, helmv2.ReleasedCondition); rel != nil {
		if rel.Status == "True" {
			conditions.MarkTrue(obj, meta.ReadyCondition, rel.Reason, "%s", rel.Message)
		} else {
			conditions.MarkFalse(obj, meta.ReadyCondition, rel.Reason, "%s", rel.Message)
		}
		return
	}
	conditions.MarkTrue(obj, meta.ReadyCondition, meta.SucceededReason, "release %s is in sync", req.releaseName())
}
