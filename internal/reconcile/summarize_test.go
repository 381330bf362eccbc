package reconcile

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// Ready after a remediation, as upstream reports it: a rollback speaks for
// Ready, an uninstall leaves Ready with the failure that caused it, and an
// uninstalled release is never Ready.
func TestSummarizeAfterRemediation(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason + " message"}
	}
	cases := []struct {
		name       string
		testing    bool
		conditions []metav1.Condition
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{name: "install failed, uninstalled",
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason),
				cond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason)},
			wantStatus: metav1.ConditionFalse, wantReason: helmv2.InstallFailedReason},
		{name: "upgrade failed, uninstall failed",
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason),
				cond(helmv2.RemediatedCondition, metav1.ConditionFalse, helmv2.UninstallFailedReason)},
			wantStatus: metav1.ConditionFalse, wantReason: helmv2.UpgradeFailedReason},
		{name: "upgrade failed, rolled back",
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason),
				cond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason)},
			wantStatus: metav1.ConditionFalse, wantReason: helmv2.RollbackSucceededReason},
		{name: "test failed, uninstalled", testing: true,
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason),
				cond(helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason),
				cond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason)},
			wantStatus: metav1.ConditionFalse, wantReason: helmv2.TestFailedReason},
		{name: "uninstalled after a release that succeeded",
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason),
				cond(helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason)},
			wantStatus: metav1.ConditionFalse, wantReason: helmv2.UninstallSucceededReason},
		{name: "test failed, then tests turned off",
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason),
				cond(helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason)},
			wantStatus: metav1.ConditionTrue, wantReason: helmv2.InstallSucceededReason},
		{name: "installed",
			conditions: []metav1.Condition{
				cond(helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)},
			wantStatus: metav1.ConditionTrue, wantReason: helmv2.InstallSucceededReason},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v2.HelmRelease{}
			if tc.testing {
				obj.Spec.Test = &helmv2.Test{Enable: true}
			}
			obj.Status.Conditions = tc.conditions
			summarizeRelease(&Request{Object: obj})
			ready := conditions.Get(obj, meta.ReadyCondition)
			if ready == nil || ready.Status != tc.wantStatus || ready.Reason != tc.wantReason || ready.Message != tc.wantReason+" message" {
				t.Errorf("Ready %+v, want %s/%s with its message", ready, tc.wantStatus, tc.wantReason)
			}
			if test := conditions.Get(obj, helmv2.TestSuccessCondition); !tc.testing && test != nil {
				t.Errorf("TestSuccess %+v kept with tests off", test)
			}
		})
	}
}
