package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// Values that make podinfo's pods crash loop in the workload simulator: its
// Deployment never becomes available, so every Helm wait on it times out.
const crashloopValues = `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`

const simFail = "sim.afterhooks.io/fail"

// TestInstallFailureUninstallRemediation installs podinfo with pods that
// never become ready: the first failure is remediated by an uninstall and
// retried, the second exhausts the retries and stalls the release, and new
// values start counting afresh and install.
func TestInstallFailureUninstallRemediation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, crashloopValues)
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{
		Timeout:     &metav1.Duration{Duration: 6 * time.Second},
		Remediation: &helmv2.InstallRemediation{Retries: 1},
	}}
	env.Create(t, hr)

	framework.Step(t, "first-failure-uninstalled", func(t *testing.T) {
		env.Eventually(t, time.Minute, "first install failure remediated by uninstall", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 1 {
				return fmt.Errorf("installFailures %d, want 1", hr.Status.InstallFailures)
			}
			if err := framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			if err := framework.Condition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason); err != nil {
				return err
			}
			return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, "")
		})
		if hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionInstall {
			t.Errorf("lastAttemptedReleaseAction %q, want install", hr.Status.LastAttemptedReleaseAction)
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: helmv2.InstallFailedReason,
			Contains: "Helm install failed",
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeNormal, Reason: helmv2.UninstallSucceededReason,
		})
	})

	framework.Step(t, "retries-exhausted", func(t *testing.T) {
		env.Eventually(t, time.Minute, "HelmRelease stalled after the retry failed", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 2 {
				return fmt.Errorf("installFailures %d, want 2", hr.Status.InstallFailures)
			}
			return nil
		})
		if err := framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
			t.Error(err)
		}
		if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
			t.Error(err)
		}
		if hr.Status.Failures != 2 {
			t.Errorf("failures %d, want 2", hr.Status.Failures)
		}
		// The last failure is not remediated (remediateLastFailure is unset):
		// the failed release stays in storage for inspection.
		stored := env.Storage(t, ns, "podinfo")
		if len(stored) != 1 || stored[0].Release.Info.Status != "failed" {
			t.Fatalf("Helm storage after the retries: %s, want one failed release", framework.Describe(stored))
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "failed" || latest.Version != stored[0].Release.Version {
			t.Errorf("latest snapshot %+v, want the failed v%d", latest, stored[0].Release.Version)
		}
	})

	framework.Step(t, "no-more-attempts", func(t *testing.T) {
		before := env.Storage(t, ns, "podinfo")
		token := env.RequestReconcile(t, hr)
		env.WaitReconcileHandled(t, hr, token, 30*time.Second)
		env.Consistently(t, 4*time.Second, "a stalled release is not retried", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 2 {
				return fmt.Errorf("installFailures moved to %d", hr.Status.InstallFailures)
			}
			if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			return env.SameStorage(t, ns, "podinfo", before)
		})
	})

	// As upstream, new values retry the failed release with an upgrade
	// over it (the parity scenario install-fail-then-values-change).
	framework.Step(t, "new-values-upgrade", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = nil })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason})
		if hr.Status.InstallFailures != 0 || hr.Status.Failures != 0 {
			t.Errorf("failure counters not reset by the new values: installFailures %d failures %d",
				hr.Status.InstallFailures, hr.Status.Failures)
		}
		for _, typ := range []string{meta.StalledCondition, helmv2.RemediatedCondition} {
			if c := conditions.Get(hr, typ); c != nil {
				t.Errorf("%s condition still present after a successful upgrade: %+v", typ, c)
			}
		}
		if err := framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason); err != nil {
			t.Error(err)
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "deployed" {
			t.Errorf("latest snapshot %+v, want deployed", latest)
		}
		if a := env.PodTemplateAnnotations(t, ns, "podinfo"); a[simFail] != "" {
			t.Errorf("pod template still has %s=%s", simFail, a[simFail])
		}
		env.WantDeploymentReplicas(t, ns, "podinfo", 1)
	})
}

// TestUpgradeFailureRollback upgrades a healthy podinfo to pods that never
// become ready; the failed upgrade is rolled back to the previous release.
func TestUpgradeFailureRollback(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, `{"replicaCount":1}`)
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
		Timeout: &metav1.Duration{Duration: 6 * time.Second},
		Remediation: &helmv2.UpgradeRemediation{
			Retries:              0,
			RemediateLastFailure: ptr.To(true),
		},
	}}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
	installed := *hr.Status.History.Latest()

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(crashloopValues) })
	env.Eventually(t, time.Minute, "failed upgrade rolled back", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		if err := framework.Condition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason); err != nil {
			return err
		}
		if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
			return err
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Version < 3 {
			return fmt.Errorf("history %s, waiting for the rollback's snapshot", framework.Snapshots(hr.Status.History))
		}
		return nil
	})
	if err := framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason); err != nil {
		t.Error(err)
	}
	if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
		t.Error(err)
	}
	if hr.Status.UpgradeFailures != 1 {
		t.Errorf("upgradeFailures %d, want 1", hr.Status.UpgradeFailures)
	}

	// History: v3 (the rollback, made from v1's chart and values), v2 (the
	// failed upgrade), v1.
	h := hr.Status.History
	latest := h.Latest()
	if len(h) != 3 || latest.Version != 3 || latest.Status != "deployed" ||
		latest.ChartVersion != installed.ChartVersion || latest.ConfigDigest != installed.ConfigDigest {
		t.Fatalf("history after the rollback: %s; want v3 deployed with v1's chart %s and config %s",
			framework.Snapshots(h), installed.ChartVersion, installed.ConfigDigest)
	}
	if h[1].Version != 2 || h[1].Status == "deployed" || h[1].ConfigDigest == installed.ConfigDigest {
		t.Errorf("snapshot of the failed upgrade: %+v", h[1])
	}
	stored := env.Storage(t, ns, "podinfo")
	if len(stored) != 3 {
		t.Fatalf("Helm storage: %s, want 3 revisions", framework.Describe(stored))
	}
	v3 := stored[2].Release
	if v3.Info.Status != "deployed" || !strings.Contains(v3.Info.Description, "Rollback to 1") {
		t.Errorf("v3 in storage is %s (%q), want a deployed rollback to 1", v3.Info.Status, v3.Info.Description)
	}
	if stored[1].Release.Info.Status == "deployed" {
		t.Errorf("the failed upgrade v2 is still deployed in storage")
	}
	env.Eventually(t, 30*time.Second, "rolled back Deployment available", func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Get(ctx, d, ns, "podinfo"); err != nil {
			return err
		}
		if v, ok := d.Spec.Template.Annotations[simFail]; ok {
			return fmt.Errorf("pod template still annotated %s=%s after the rollback", simFail, v)
		}
		if d.Status.ReadyReplicas != 1 || d.Status.UpdatedReplicas != 1 {
			return fmt.Errorf("Deployment ready %d updated %d", d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
		}
		return nil
	})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.UpgradeFailedReason})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: helmv2.RollbackSucceededReason})
	env.Consistently(t, 3*time.Second, "no upgrade after the remediated last failure", func(ctx context.Context) error {
		return env.SameStorage(t, ns, "podinfo", stored)
	})
}

// TestInstallRetryOnFailure retries a failing install on an interval
// instead of remediating it, and deploys once the values are fixed. As
// upstream, the failed install is retried with upgrades over it, so the
// upgrade's strategy is RetryOnFailure too: with the install's alone, the
// first failed upgrade stalls, as under upstream (the parity scenario
// install-retry-on-failure).
func TestInstallRetryOnFailure(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, crashloopValues)
	retry := &metav1.Duration{Duration: 5 * time.Second}
	hr.Spec.Timeout = &metav1.Duration{Duration: 5 * time.Second}
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{
		Strategy: &helmv2.InstallStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure), RetryInterval: retry},
		// Remediation settings are not used with RetryOnFailure.
		Remediation: &helmv2.InstallRemediation{Retries: 3},
	}}
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
		Strategy: &helmv2.UpgradeStrategy{Name: string(helmv2.ActionStrategyRetryOnFailure), RetryInterval: retry},
	}}
	env.Create(t, hr)

	// Every poll also checks the failed release is never uninstalled.
	noRemediation := func(ctx context.Context) error {
		if c := conditions.Get(hr, helmv2.RemediatedCondition); c != nil {
			return fmt.Errorf("remediated although the strategy is RetryOnFailure: %+v", c)
		}
		if c := conditions.Get(hr, meta.StalledCondition); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("stalled although the strategy retries forever: %+v", c)
		}
		return nil
	}
	var firstFailed int
	framework.Step(t, "failure-not-remediated", func(t *testing.T) {
		env.Eventually(t, time.Minute, "install failed", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			return framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		})
		if err := noRemediation(context.Background()); err != nil {
			t.Fatal(err)
		}
		stored := env.Storage(t, ns, "podinfo")
		if len(stored) == 0 {
			t.Fatalf("no release in storage after the failed install: it was removed")
		}
		firstFailed = stored[len(stored)-1].Release.Version
	})

	var retried int
	framework.Step(t, "failure-retried", func(t *testing.T) {
		// Wait for the retry to have failed and been recorded, so that the
		// values change below lands between two attempts.
		env.Eventually(t, time.Minute, "failed install retried with an upgrade over it", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := noRemediation(ctx); err != nil {
				t.Fatal(err)
			}
			stored := env.Storage(t, ns, "podinfo")
			if len(stored) == 0 {
				t.Fatalf("the failed release was removed from storage")
			}
			last := stored[len(stored)-1].Release
			if last.Version <= firstFailed || last.Info.Status != "failed" {
				return fmt.Errorf("storage: %s; waiting for a failed attempt after v%d", framework.Describe(stored), firstFailed)
			}
			if latest := hr.Status.History.Latest(); latest == nil || latest.Version != last.Version || latest.Status != "failed" {
				return fmt.Errorf("history %s, waiting for the failed v%d", framework.Snapshots(hr.Status.History), last.Version)
			}
			retried = last.Version
			return nil
		})
		if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason); err != nil {
			t.Error(err)
		}
		if env.HasEvent(t, ns, hr.Name, helmv2.UninstallSucceededReason) {
			t.Errorf("an uninstall happened although the strategy is RetryOnFailure")
		}
	})

	framework.Step(t, "fixed-values-install", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"replicaCount":1}`) })
		env.Eventually(t, time.Minute, "fixed release Ready", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			// Whatever the reason, the new values deployed.
			if err := framework.ReleaseReady(hr, framework.ReleaseWant{}); err != nil {
				return err
			}
			if latest := hr.Status.History.Latest(); latest.ConfigDigest != hr.Status.LastAttemptedConfigDigest {
				return fmt.Errorf("history %s, waiting for the new values deployed", framework.Snapshots(hr.Status.History))
			}
			return nil
		})
		t.Logf("Ready: %s: %s", conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition))
		// As upstream: an upgrade over the failed revision, which Helm
		// supersedes. With RetryOnFailure the history is cut to the newest
		// five (upstream's TruncateIgnoringPreviousSnapshots), so it holds
		// every revision since the failed install, up to five.
		h := hr.Status.History
		newest := retried + 1
		if latest := h.Latest(); latest.Version != newest || len(h) < 2 || h[1].Status != "superseded" || len(h) != min(newest, 5) {
			t.Errorf("history %s, want v%d deployed, v%d superseded and the revisions before, %d in all",
				framework.Snapshots(h), newest, retried, min(newest, 5))
		}
		for i, s := range h {
			if s.Version != newest-i {
				t.Errorf("history %s: entry %d is v%d, want v%d", framework.Snapshots(h), i, s.Version, newest-i)
			}
		}
		if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason); err != nil {
			t.Error(err)
		}
		stored := env.Storage(t, ns, "podinfo")
		if last := stored[len(stored)-1].Release; last.Version != retried+1 || last.Info.Status != "deployed" {
			t.Errorf("Helm storage %s, want v%d deployed", framework.Describe(stored), retried+1)
		}
		env.WantDeploymentReplicas(t, ns, "podinfo", 1)
		if env.HasEvent(t, ns, hr.Name, helmv2.UninstallSucceededReason) {
			t.Errorf("an uninstall happened although the strategy is RetryOnFailure")
		}
	})
}

// TestHelmTests runs chart tests after the install: passing tests make the
// release Ready, a failing test is remediated unless failures are ignored.
func TestHelmTests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// podinfo, or the e2e-tests chart with a failing test.
		failingChart   bool
		ignoreFailures bool
		check          func(t *testing.T, hr *v2.HelmRelease)
	}{
		{
			name: "podinfo-tests-pass",
			check: func(t *testing.T, hr *v2.HelmRelease) {
				env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.TestSucceededReason})
				if err := framework.Condition(hr, helmv2.TestSuccessCondition, metav1.ConditionTrue, helmv2.TestSucceededReason); err != nil {
					t.Error(err)
				}
				hooks := hr.Status.History.Latest().GetTestHooks()
				var names []string
				for name, h := range hooks {
					names = append(names, name)
					if h.Phase != "Succeeded" || h.LastStarted.IsZero() || h.LastCompleted.IsZero() {
						t.Errorf("test hook %s: %+v, want Succeeded with start and completion times", name, h)
					}
				}
				sort.Strings(names)
				joined := strings.Join(names, ",")
				for _, want := range []string{"grpc-test", "jwt-test", "service-test"} {
					if !strings.Contains(joined, want) {
						t.Errorf("test hooks %v do not include podinfo's %s", names, want)
					}
				}
				if len(hooks) != 3 {
					t.Errorf("%d test hooks recorded (%v), want podinfo's 3 default tests; history %s",
						len(hooks), names, framework.Snapshots(hr.Status.History))
				}
				env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{
					Type: corev1.EventTypeNormal, Reason: helmv2.TestSucceededReason,
				})
			},
		},
		{
			name:         "failing-test-remediated",
			failingChart: true,
			check: func(t *testing.T, hr *v2.HelmRelease) {
				env.Eventually(t, time.Minute, "failed test remediated", func(ctx context.Context) error {
					if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
						return err
					}
					if err := framework.Condition(hr, helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason); err != nil {
						return err
					}
					if err := framework.Condition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason); err != nil {
						return err
					}
					if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
						return err
					}
					if hr.Status.InstallFailures == 0 {
						return fmt.Errorf("failure not counted yet")
					}
					// Flux's patch helper writes the conditions and the rest of
					// the status in two requests: the history may follow the
					// Remediated condition by a moment.
					if latest := hr.Status.History.Latest(); latest == nil || !latest.HasTestInPhase("Failed") || latest.Status != "uninstalled" {
						return fmt.Errorf("latest snapshot %+v, want an uninstalled release with a failed test", latest)
					}
					return nil
				})
				if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
					t.Error(err)
				}
				if msg := conditions.GetMessage(hr, helmv2.TestSuccessCondition); !strings.Contains(msg, "verify-test") {
					t.Errorf("TestSuccess message %q does not name the failed test", msg)
				}
				if hr.Status.InstallFailures != 1 {
					t.Errorf("installFailures %d, want the failed test counted once", hr.Status.InstallFailures)
				}
				if stored := env.Storage(t, hr.Namespace, hr.Name); len(stored) != 0 {
					t.Errorf("Helm storage after the uninstall remediation: %s", framework.Describe(stored))
				}
				env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{
					Type: corev1.EventTypeWarning, Reason: helmv2.TestFailedReason,
				})
			},
		},
		{
			name:           "failing-test-ignored",
			failingChart:   true,
			ignoreFailures: true,
			check: func(t *testing.T, hr *v2.HelmRelease) {
				env.Eventually(t, time.Minute, "Ready despite the failed test", func(ctx context.Context) error {
					if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
						return err
					}
					if hr.Status.ObservedGeneration != hr.Generation {
						return fmt.Errorf("observedGeneration %d", hr.Status.ObservedGeneration)
					}
					if err := framework.Condition(hr, helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason); err != nil {
						return err
					}
					// As upstream: ignored tests leave Ready to the release.
					if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason); err != nil {
						return err
					}
					if !hr.Status.History.Latest().HasBeenTested() {
						return fmt.Errorf("history %s, waiting for the tests to be recorded", framework.Snapshots(hr.Status.History))
					}
					return nil
				})
				t.Logf("Ready with ignored test failures: %s: %s", conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition))
				if c := conditions.Get(hr, helmv2.RemediatedCondition); c != nil {
					t.Errorf("remediated although test failures are ignored: %+v", c)
				}
				// As upstream (TestUpstreamParity): status.failures counts
				// the failed test, remediation's counter does not.
				if hr.Status.InstallFailures != 0 || hr.Status.Failures != 1 {
					t.Errorf("ignored test failure: installFailures %d failures %d, want 0 and 1", hr.Status.InstallFailures, hr.Status.Failures)
				}
				latest := hr.Status.History.Latest()
				if latest == nil || latest.Status != "deployed" || !latest.HasTestInPhase("Failed") || !latest.HasTestInPhase("Succeeded") {
					t.Errorf("latest snapshot %+v, want deployed with a failed and a passed test", latest)
				}
				stored := env.Storage(t, hr.Namespace, hr.Name)
				if len(stored) != 1 || stored[0].Release.Info.Status != "deployed" {
					t.Errorf("Helm storage: %s, want one deployed release", framework.Describe(stored))
				}
				env.Consistently(t, 2*time.Second, "no remediation of ignored test failures", func(ctx context.Context) error {
					return env.SameStorage(t, hr.Namespace, hr.Name, stored)
				})
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			var hr *v2.HelmRelease
			if tc.failingChart {
				chart := env.PublishChart(t, "e2e-tests", "0.1.0", ns, chartserver.WithValues(map[string]any{"testFail": true}))
				repo := env.HelmRepository(t, ns)
				hr = framework.Release(ns, "tested", repo.Name, chart.Name, chart.Version, "")
			} else {
				repo := env.HelmRepository(t, ns)
				hr = env.PodinfoRelease(ns, "podinfo", repo.Name, "")
			}
			hr.Spec.Test = &helmv2.Test{
				Enable:         true,
				IgnoreFailures: tc.ignoreFailures,
				Timeout:        &metav1.Duration{Duration: 30 * time.Second},
			}
			hr.Spec.Install = &v2.Install{Install: helmv2.Install{
				Timeout:     &metav1.Duration{Duration: 30 * time.Second},
				Remediation: &helmv2.InstallRemediation{Retries: 0, RemediateLastFailure: ptr.To(true)},
			}}
			env.Create(t, hr)
			tc.check(t, hr)
		})
	}
}

// TestResetAndForceRequests covers the reconcile.fluxcd.io/resetAt and
// forceAt annotations.
func TestResetAndForceRequests(t *testing.T) {
	t.Parallel()

	t.Run("reset-retries-stalled-release", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		// The pods need a Secret that does not exist yet: the install times
		// out, and with no retries the release stalls.
		hr := env.PodinfoRelease(ns, "podinfo", repo.Name, `{"extraEnvs":[{"name":"DB_PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}]}`)
		hr.Spec.Install = &v2.Install{Install: helmv2.Install{
			Timeout:     &metav1.Duration{Duration: 5 * time.Second},
			Remediation: &helmv2.InstallRemediation{Retries: 0},
		}}
		env.Create(t, hr)
		env.Eventually(t, time.Minute, "install retries exhausted", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			if err := framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 1 {
				return fmt.Errorf("installFailures %d, want 1", hr.Status.InstallFailures)
			}
			return nil
		})
		stalled := env.Storage(t, ns, "podinfo")
		if len(stalled) != 1 || stalled[0].Release.Info.Status != "failed" {
			t.Fatalf("Helm storage: %s, want one failed release", framework.Describe(stalled))
		}

		// What the pods were missing appears, but a stalled release is not
		// retried by an ordinary reconcile request.
		if err := env.Client.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			StringData: map[string]string{"password": "s3cret"},
		}); err != nil {
			t.Fatal(err)
		}
		token := env.RequestReconcile(t, hr)
		// Every reconcile drops Stalled while it runs (Reconciling=True);
		// judge the state once the request has been handled.
		env.WaitReconcileHandled(t, hr, token, 30*time.Second)
		env.Consistently(t, 4*time.Second, "stalled release left alone without a reset", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			return env.SameStorage(t, ns, "podinfo", stalled)
		})

		reset := strconv.FormatInt(time.Now().UnixNano(), 10)
		env.Annotate(t, hr, map[string]string{meta.ReconcileRequestAnnotation: reset, helmv2.ResetRequestAnnotation: reset})
		// As upstream, the reset failed release is retried with an upgrade
		// over it.
		env.Eventually(t, time.Minute, "reset release upgraded", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.LastHandledResetAt != reset {
				return fmt.Errorf("lastHandledResetAt %q, want %q", hr.Status.LastHandledResetAt, reset)
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason); err != nil {
				return err
			}
			// Flux's patch helper writes the conditions and the rest of
			// the status in two requests: the history may come a moment
			// after Ready.
			if latest := hr.Status.History.Latest(); latest == nil || latest.Version != 2 {
				return fmt.Errorf("latest snapshot %+v, want v2", latest)
			}
			return nil
		})
		if hr.Status.InstallFailures != 0 || hr.Status.Failures != 0 {
			t.Errorf("failure counters after the reset and upgrade: installFailures %d failures %d",
				hr.Status.InstallFailures, hr.Status.Failures)
		}
		if c := conditions.Get(hr, meta.StalledCondition); c != nil {
			t.Errorf("Stalled condition still present: %+v", c)
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "deployed" || latest.Version != 2 {
			t.Errorf("latest snapshot %+v, want v2 deployed over the failed v1", latest)
		}
		env.WantDeploymentReplicas(t, ns, "podinfo", 1)
	})

	t.Run("force-upgrades-in-sync-release", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		hr := env.PodinfoRelease(ns, "podinfo", repo.Name, `{"replicaCount":1}`)
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		installed := *hr.Status.History.Latest()

		// A force token that does not match requestedAt is recorded but
		// does nothing.
		mismatched := "force-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		request := strconv.FormatInt(time.Now().UnixNano(), 10)
		env.Annotate(t, hr, map[string]string{meta.ReconcileRequestAnnotation: request, meta.ForceRequestAnnotation: mismatched})
		env.WaitReconcileHandled(t, hr, request, 30*time.Second)
		if got := len(env.Storage(t, ns, "podinfo")); got != 1 {
			t.Fatalf("%d Helm revisions after a force token that does not match requestedAt, want 1", got)
		}

		force := strconv.FormatInt(time.Now().UnixNano(), 10)
		env.Annotate(t, hr, map[string]string{meta.ReconcileRequestAnnotation: force, meta.ForceRequestAnnotation: force})
		env.Eventually(t, time.Minute, "forced upgrade done", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.LastHandledForceAt != force {
				return fmt.Errorf("lastHandledForceAt %q, want %q", hr.Status.LastHandledForceAt, force)
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason); err != nil {
				return err
			}
			// Conditions are written in a request before the rest of the
			// status: wait for the history too.
			if latest := hr.Status.History.Latest(); latest == nil || latest.Version < 2 {
				return fmt.Errorf("history %s, waiting for the forced revision", framework.Snapshots(hr.Status.History))
			}
			return nil
		})
		latest := hr.Status.History.Latest()
		if latest.Version != 2 {
			t.Fatalf("latest snapshot is v%d after one force request, want v2 (history %s)", latest.Version, framework.Snapshots(hr.Status.History))
		}
		if latest.ChartVersion != installed.ChartVersion || latest.ConfigDigest != installed.ConfigDigest {
			t.Errorf("forced upgrade changed chart or values: %+v, installed %+v", latest, installed)
		}
		if got := len(env.Storage(t, ns, "podinfo")); got != 2 {
			t.Errorf("%d Helm revisions after the forced upgrade, want 2", got)
		}

		// The force token is handled once: a later reconcile does nothing.
		again := env.RequestReconcile(t, hr)
		env.WaitReconcileHandled(t, hr, again, 30*time.Second)
		if got := len(env.Storage(t, ns, "podinfo")); got != 2 {
			t.Errorf("%d Helm revisions after another reconcile request, want 2 (force handled once)", got)
		}
	})
}
