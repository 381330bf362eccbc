package reconcile

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"

	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// test runs the chart's Helm tests on the current release.
func (m *Machine) test(ctx context.Context, req *Request) error {
	m.announce(req, helmverb.Test, req.Object.GetTest().GetTimeout(req.Object.GetTimeout()), false)
	rel, err := m.Helm.Test(ctx)
	latest := req.Object.Status.History.Latest()
	if rel != nil {
		latest = recordSnapshot(req, rel, "")
		latest.SetTestHooks(testHookStatuses(rel, req.Object.GetTest().GetFilters()))
	}
	if err != nil {
		msg := fmt.Sprintf("Helm test failed for release %s: %s", describeRelease(latest), trimError(err))
		conditions.MarkFalse(req.Object, helmv2.TestSuccessCondition, helmv2.TestFailedReason, "%s", msg)
		m.warning(req, latest, helmv2.TestFailedReason, msg)
		// As upstream: a failed test counts in status.failures even when
		// ignored; for remediation only when it is not.
		countFailure(ctx, req)
		if ignoreTestFailures(req) {
			return nil
		}
		countActionFailure(req, req.Object.Status.LastAttemptedReleaseAction)
		return fmt.Errorf("%s", msg)
	}
	msg := testSuccessMessage(latest)
	conditions.MarkTrue(req.Object, helmv2.TestSuccessCondition, helmv2.TestSucceededReason, "%s", msg)
	m.normal(req, latest, helmv2.TestSucceededReason, msg)
	return nil
}

// testSuccessMessage words a successful test run as upstream does:
// "... with chart podinfo@6.7.1: 3 test hooks completed successfully".
func testSuccessMessage(s *helmv2.Snapshot) string {
	hooks := "no test hooks"
	switch n := len(s.GetTestHooks()); {
	case n == 1:
		hooks = "1 test hook completed successfully"
	case n > 1:
		hooks = fmt.Sprintf("%d test hooks completed successfully", n)
	}
	return fmt.Sprintf("Helm test succeeded for release %s: %s", describeRelease(s), hooks)
}
