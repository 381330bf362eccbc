package e2e

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestAfterHooksProgress watches the Reconciling condition of an afterHooks
// install from creation to Ready: it must name the running hook and then
// the resources the readiness wait is waiting for.
func TestAfterHooksProgress(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, framework.HookDelayChart, "0.3.0", ns)
	// Slow hook and slow pods, so both phases last long enough to be seen.
	hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, `{"hookDelay":"3s","podAnnotations":{"sim.afterhooks.io/delay":"6s"}}`)
	hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
	hr.Spec.Install.Timeout = &metav1.Duration{Duration: time.Minute}
	env.Create(t, hr)

	seen := map[string]bool{}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if err := env.Get(context.Background(), hr, ns, hr.Name); err == nil {
			if c := conditions.Get(hr, meta.ReconcilingCondition); c != nil {
				seen[c.Message] = true
			}
			if c := conditions.Get(hr, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue && c.Reason == helmv2.InstallSucceededReason {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var hook, wait bool
	for msg := range seen {
		hook = hook || strings.Contains(msg, "running post-install hooks 1/1: job/app-create-creds")
		wait = wait || (strings.Contains(msg, "waiting for") && strings.Contains(msg, "deployment/app"))
	}
	if !hook || !wait {
		t.Errorf("Reconciling messages seen %v: want the running hook (%v) and the readiness wait (%v)", slices.Collect(maps.Keys(seen)), hook, wait)
	}
}
