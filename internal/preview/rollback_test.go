package preview_test

import (
	"context"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v4/pkg/release/common"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// A revision whose readiness wait an earlier reconcile cancelled, with
// nothing changed since, is remediated by the next one: the plan says
// rollback to the revision before, and the machine then rolls back to it
// with the objects and hooks the plan named.
func TestPlanOfARemediationMatchesWhatHappens(t *testing.T) {
	e := newEnv(t, nil)
	obj := e.hr(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 1}}}
	})
	e.reconcile(obj, chartV1, values("a", "1"))
	e.reconcile(obj, chartV2, values("a", "1"))
	e.failLatestByCancelledWait(obj)
	before := e.configMaps()

	pv := e.preview(obj, chartV2(), values("a", "1"))
	if pv.Step != reconcile.StepRollback || len(pv.Actions) != 1 {
		t.Fatalf("step %s (%s), actions %d; want one rollback", pv.Step, pv.Reason, len(pv.Actions))
	}
	planned := pv.Actions[0]
	if planned.Verb != plan.Rollback || planned.Plan.Revision.Version != 1 {
		t.Fatalf("planned %s to revision %d, want a rollback to 1", planned.Verb, planned.Plan.Revision.Version)
	}
	eq(t, "planned hooks", hookNames(planned.Hooks), nil)

	m := &reconcile.Machine{Helm: e.runner(obj)}
	values := values("a", "1")
	req := &reconcile.Request{Object: obj, ReleaseName: "web", Chart: chart{chartV2}, Values: values,
		ConfigDigest: chartutil.DigestValues(digest.Canonical, values).String()}
	_ = m.Run(context.Background(), req) // ends with the failure it remediated
	after := e.configMaps()

	if got := obj.Status.History.Latest(); string(got.Action) != string(plan.Rollback) || got.ChartVersion != "1.0.0" {
		t.Fatalf("latest revision: %s of %s, want a rollback to 1.0.0", got.Action, got.ChartVersion)
	}
	e.compareObjects(planned.Objects, before, after)
}

// failLatestByCancelledWait leaves obj's latest revision as a reconcile
// whose readiness wait was cancelled leaves it: failed in storage and in
// the history, Released False with HealthCheckCanceled, one failure.
func (e *env) failLatestByCancelledWait(obj *v2.HelmRelease) {
	e.t.Helper()
	cfg, rel := e.lastRelease()
	rel.Info.Status = common.StatusFailed
	if err := cfg.Releases.Update(rel); err != nil {
		e.t.Fatal(err)
	}
	obj.Status.History.Latest().Status = common.StatusFailed.String()
	conditions.MarkFalse(obj, helmv2.ReleasedCondition, meta.HealthCheckCanceledReason, "a new revision was seen")
	obj.Status.Failures, obj.Status.UpgradeFailures = 1, 1
	obj.Status.LastAttemptedReleaseAction = helmv2.ReleaseActionUpgrade
}
