package e2e

import (
	"strings"
	"testing"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestPlanOfTheDeadlockChartWarns (issue 49, before it happens): the plan
// of a new release of the chart this controller exists for, whose
// Deployment mounts a Secret only its post-install hook creates, warns
// before the install and suggests afterHooks; with afterHooks it does not
// warn. The HelmRelease is not applied: the plan fetches the chart from
// the HelmRepository itself.
func TestPlanOfTheDeadlockChartWarns(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ref := env.PublishChart(t, "afterhooks-deadlock", "0.1.0", ns)
	repo := env.HelmRepository(t, ns)
	hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, "")
	want := "warning: the pods of Deployment/app need Secret app-creds, which neither the release's objects nor the cluster have; " +
		"1 post-install hook runs after the readiness wait; if one of them creates app-creds, set waitStrategy: afterHooks"
	if text := runPlanCommand(t, hr, "", "text"); !strings.Contains(text, want) {
		t.Errorf("the plan lacks %q:\n%s", want, text)
	}
	hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
	if text := runPlanCommand(t, hr, "", "text"); strings.Contains(text, "warning:") || !strings.Contains(text, "hook order afterHooks") {
		t.Errorf("the plan under afterHooks warns, or is not afterHooks:\n%s", text)
	}
}
