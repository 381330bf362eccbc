package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestDefaultToAfterHooksGate runs a controller with the DefaultToAfterHooks
// feature gate: a HelmRelease that leaves waitStrategy unset gets
// afterHooks (and installs the deadlock chart), one that says beforeHooks
// keeps Helm's order (and deadlocks).
func TestDefaultToAfterHooksGate(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, framework.HookDelayChart, "0.2.0", ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{
		Shard: "gate-" + rand.String(8),
		Args:  []string{"--feature-gates=DefaultToAfterHooks=true"},
	})

	release := func(name string, strategy v2.HookWaitStrategy, timeout time.Duration) *v2.HelmRelease {
		hr := framework.Sharded(framework.Release(ns, name, repo.Name, ref.Name, ref.Version, ""), ctl)
		hr.Spec.Install = &v2.Install{WaitStrategy: strategy}
		hr.Spec.Install.Timeout = &metav1.Duration{Duration: timeout}
		hr.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 0}
		env.Create(t, hr)
		return hr
	}
	unset := release("unset", "", time.Minute)
	explicit := release("explicit", v2.BeforeHooks, 10*time.Second)

	env.WaitRelease(t, unset, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	env.WaitEvent(t, ns, unset.Name, framework.EventWant{
		Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
		Contains: "Post-install hooks of unset.v1 completed",
	})

	env.Eventually(t, time.Minute, "explicit beforeHooks deadlocks", func(ctx context.Context) error {
		if err := env.Get(ctx, explicit, ns, explicit.Name); err != nil {
			return err
		}
		c := conditions.Get(explicit, helmv2.ReleasedCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != helmv2.InstallFailedReason {
			return fmt.Errorf("Released condition %+v", c)
		}
		return nil
	})
	if env.HasEvent(t, ns, explicit.Name, framework.AfterHooksWaitingReason) {
		t.Error("an explicit beforeHooks release ran the afterHooks wait")
	}
}
