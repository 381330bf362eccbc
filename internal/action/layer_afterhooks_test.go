package action

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// cleanupOnFail of the upgrade and rollback reaches the afterHooks run;
// install has none.
func TestAfterHooksActionCleanupOnFail(t *testing.T) {
	obj := &v2.HelmRelease{}
	obj.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CleanupOnFail: true}}
	if a := afterHooksAction(planned(t, nil, obj, plan.Upgrade, asked{})); !a.CleanupOnFail {
		t.Error("upgrade.cleanupOnFail not passed on")
	}
	if a := afterHooksAction(planned(t, nil, obj, plan.Rollback, asked{})); a.CleanupOnFail {
		t.Error("rollback cleans up without rollback.cleanupOnFail")
	}
	obj.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{CleanupOnFail: true}}
	if a := afterHooksAction(planned(t, nil, obj, plan.Rollback, asked{})); !a.CleanupOnFail {
		t.Error("rollback.cleanupOnFail not passed on")
	}
	if a := afterHooksAction(planned(t, nil, obj, plan.Install, asked{})); a.CleanupOnFail {
		t.Error("install cleans up")
	}
}
