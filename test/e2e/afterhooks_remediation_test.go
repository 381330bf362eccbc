package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestAfterHooksInstallRemediation: an afterHooks install whose pods never
// become ready fails after its hook ran and is remediated per spec, here
// uninstalled and retried once, exactly as a failed beforeHooks wait is.
func TestAfterHooksInstallRemediation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, "afterhooks-deadlock", "0.1.0", ns)
	hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`)
	hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
	hr.Spec.Install.Timeout = &metav1.Duration{Duration: 8 * time.Second}
	hr.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 1}
	env.Create(t, hr)

	env.Eventually(t, time.Minute, "first failure uninstalled", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		if hr.Status.InstallFailures < 1 {
			return fmt.Errorf("installFailures %d", hr.Status.InstallFailures)
		}
		c := conditions.Get(hr, helmv2.RemediatedCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != helmv2.UninstallSucceededReason {
			return fmt.Errorf("Remediated condition %+v", c)
		}
		return nil
	})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{
		Type: "Normal", Reason: framework.AfterHooksWaitingReason,
		Contains: "Post-install hooks of app.v1 completed",
	})

	env.Eventually(t, time.Minute, "retries exhausted", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		// Conditions and counters are patched in separate requests; wait
		// for both. Two failures: the first try and its one retry.
		if c := conditions.Get(hr, "Stalled"); c == nil || c.Status != metav1.ConditionTrue || hr.Status.InstallFailures != 2 {
			return fmt.Errorf("Stalled condition %+v, installFailures %d", c, hr.Status.InstallFailures)
		}
		return nil
	})
	env.WantStorage(t, ns, "app", "failed")
}
