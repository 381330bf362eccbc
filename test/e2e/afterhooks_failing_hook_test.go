package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestAfterHooksFailingHook: a post-install hook that fails fails the
// release as Helm does: the hook and its Job are named, storage records
// the revision failed, and no readiness wait starts.
func TestAfterHooksFailingHook(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	chart := env.PublishChart(t, "afterhooks-failing-hook", "0.1.0", ns)
	hr := framework.Release(ns, "app", repo.Name, chart.Name, chart.Version, "")
	hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
	hr.Spec.Install.Timeout = &metav1.Duration{Duration: 30 * time.Second}
	hr.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 0}
	env.Create(t, hr)

	env.Eventually(t, time.Minute, "install failed on its hook", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		c := conditions.Get(hr, helmv2.ReleasedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.InstallFailedReason {
			return fmt.Errorf("Released condition %+v", c)
		}
		for _, want := range []string{"post-install", "app-migrate"} {
			if !strings.Contains(c.Message, want) {
				return fmt.Errorf("message %q does not name %s", c.Message, want)
			}
		}
		return nil
	})
	t.Logf("Released: %s", conditions.Get(hr, helmv2.ReleasedCondition).Message)
	env.WantStorage(t, ns, "app", "failed")
	if env.HasEvent(t, ns, hr.Name, framework.AfterHooksWaitingReason) {
		t.Error("a readiness wait started although the post-install hook failed")
	}
}
