package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestAfterHooks runs the deadlock chart with Helm's wait order (it cannot
// install), with waitStrategy afterHooks (it installs and upgrades), and
// with afterHooks on pods that never become ready (the install fails after
// the hook ran, and the release is failed in storage).
func TestAfterHooks(t *testing.T) {
	t.Parallel()

	t.Run("beforeHooks-deadlocks", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		env.Oracle(t, ns)
		repo := env.HelmRepository(t, ns)
		ref := env.PublishChart(t, framework.DeadlockChart, "0.1.0", ns)
		hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, "")
		hr.Spec.Install = &v2.Install{Install: helmv2.Install{
			Timeout:     &metav1.Duration{Duration: 15 * time.Second},
			Remediation: &helmv2.InstallRemediation{Retries: 0},
		}}
		env.Create(t, hr)

		env.Eventually(t, 90*time.Second, "install fails with Helm's wait order", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		})
		env.WantNoSecret(t, ns, "app-creds")
		stored := env.Storage(t, ns, "app")
		if len(stored) != 1 || stored[0].Release.Info.Status != "failed" {
			t.Errorf("Helm storage %s, want one failed revision", framework.Describe(stored))
		}
		if env.HasEvent(t, ns, hr.Name, framework.AfterHooksWaitingReason) {
			t.Errorf("%s event for a beforeHooks release", framework.AfterHooksWaitingReason)
		}
	})

	t.Run("afterHooks-installs-and-upgrades", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		env.Oracle(t, ns)
		repo := env.HelmRepository(t, ns)
		ref := env.PublishChart(t, framework.DeadlockChart, "0.1.0", ns)
		hr := framework.WithWaitStrategy(framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, `{"message":"one"}`),
			v2.AfterHooks, 45*time.Second)
		env.Create(t, hr)

		framework.Step(t, "install", func(t *testing.T) {
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			env.WantStorage(t, ns, "app", "deployed")
			env.WantSecret(t, ns, "app-creds")
			env.WantDeploymentAvailable(t, ns, "app")
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{
				Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
				Contains: "Post-install hooks of app.v1 completed",
			})
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{
				Type: corev1.EventTypeNormal, Reason: framework.AfterHooksStartedReason,
				Contains: "Helm install of app started with waitStrategy afterHooks",
			})
		})

		framework.Step(t, "upgrade", func(t *testing.T) {
			env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"message":"two"}`) })
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
			env.WantStorage(t, ns, "app", "superseded", "deployed")
			env.WantDeploymentAvailable(t, ns, "app")
			if a := env.PodTemplateAnnotations(t, ns, "app"); a["e2e.afterhooks.io/message"] != "two" {
				t.Errorf("pod template annotations %v, want the upgraded message", a)
			}
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{
				Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
				Contains: "Post-upgrade hooks of app.v2 completed",
			})
		})

		framework.Step(t, "phase durations are recorded", func(t *testing.T) {
			for _, phase := range []string{"helm", "readiness"} {
				series := `helm_controller_action_phase_duration_seconds_count{action="upgrade",phase="` + phase + `",strategy="afterHooks"}`
				if n := framework.Metric(t, env.Controller.MetricsURL(), series); n < 1 {
					t.Errorf("%s = %v, want at least one observation", series, n)
				}
			}
		})
	})

	t.Run("afterHooks-upgrade-fails-rolls-back", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		env.Oracle(t, ns)
		repo := env.HelmRepository(t, ns)
		ref := env.PublishChart(t, framework.DeadlockChart, "0.1.0", ns)
		hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, "")
		hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
		hr.Spec.Upgrade = &v2.Upgrade{
			Upgrade: helmv2.Upgrade{
				Timeout:     &metav1.Duration{Duration: 10 * time.Second},
				Remediation: &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptr.To(true)},
			},
			WaitStrategy: v2.AfterHooks,
		}
		hr.Spec.Rollback = &v2.Rollback{
			Rollback:     helmv2.Rollback{Timeout: &metav1.Duration{Duration: 30 * time.Second}},
			WaitStrategy: v2.AfterHooks,
		}
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.Values = framework.JSON(`{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`)
		})
		env.WaitRolledBack(t, hr, 90*time.Second)
		released := conditions.Get(hr, helmv2.ReleasedCondition)
		if released == nil || released.Reason != helmv2.UpgradeFailedReason ||
			!strings.Contains(released.Message, "Deployment/"+ns+"/app") {
			t.Errorf("Released condition %+v, want UpgradeFailed naming Deployment/%s/app", released, ns)
		}
		env.WantStorage(t, ns, "app", "superseded", "failed", "deployed")
		if stored := env.Storage(t, ns, "app"); len(stored) == 3 && !strings.Contains(stored[2].Release.Info.Description, "Rollback to 1") {
			t.Errorf("v3 description %q, want Helm's rollback description", stored[2].Release.Info.Description)
		}
		env.WantDeploymentAvailable(t, ns, "app")
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
			Contains: "Post-rollback hooks of app.v3 completed",
		})
	})

	t.Run("afterHooks-not-ready-fails", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		env.Oracle(t, ns)
		repo := env.HelmRepository(t, ns)
		ref := env.PublishChart(t, framework.DeadlockChart, "0.1.0", ns)
		hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`)
		hr.Spec.Install = &v2.Install{
			Install: helmv2.Install{
				Timeout:     &metav1.Duration{Duration: 15 * time.Second},
				Remediation: &helmv2.InstallRemediation{Retries: 0},
			},
			WaitStrategy: v2.AfterHooks,
		}
		env.Create(t, hr)

		// While the readiness wait runs the hook is done and the revision
		// is pending, never deployed.
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
			Contains: "Post-install hooks of app.v1 completed",
		})
		if stored := env.Storage(t, ns, "app"); len(stored) == 1 && stored[0].Release.Info.Status == "deployed" {
			t.Errorf("Helm storage %s during the readiness wait, want it pending", framework.Describe(stored))
		}

		env.Eventually(t, 90*time.Second, "install fails on the readiness wait", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			// Conditions and history are patched in separate requests.
			if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "failed" {
				return fmt.Errorf("latest snapshot %+v, want failed", latest)
			}
			return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		})
		released := conditions.Get(hr, helmv2.ReleasedCondition)
		if released == nil || released.Reason != helmv2.InstallFailedReason ||
			!strings.Contains(released.Message, "Deployment/"+ns+"/app") {
			t.Errorf("Released condition %+v, want InstallFailed naming Deployment/%s/app", released, ns)
		}
		// One line, upstream's words first, in the condition and in helm history.
		words := "timeout waiting for: [Deployment/" + ns + "/app status: 'InProgress'] ("
		if ready := conditions.Get(hr, meta.ReadyCondition); !strings.Contains(ready.Message, ": "+words) || strings.Contains(ready.Message, "\n") {
			t.Errorf("Ready message %q, want one line naming the Deployment after %q", ready.Message, words)
		}
		// The hook ran: it created the Secret.
		env.WantSecret(t, ns, "app-creds")
		env.WantStorage(t, ns, "app", "failed")
		if stored := env.Storage(t, ns, "app"); len(stored) != 1 ||
			!strings.HasPrefix(stored[0].Release.Info.Description, `Release "app" failed: `+words) || strings.Contains(stored[0].Release.Info.Description, "\n") {
			t.Errorf("helm history %s, want one line starting with %q", framework.Describe(stored), words)
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: helmv2.InstallFailedReason,
			Contains: words,
		})
	})
}
