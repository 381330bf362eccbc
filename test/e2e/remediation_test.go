package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// Values that make podinfo's pods crash loop in the workload simulator: its
// Deployment never becomes available, so every Helm wait on it times out.
const remCrashloopValues = `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`

const remSimFail = "sim.afterhooks.io/fail"

// TestInstallFailureUninstallRemediation installs podinfo with pods that
// never become ready: the first failure is remediated by an uninstall and
// retried, the second exhausts the retries and stalls the release, and new
// values start counting afresh and install.
func TestInstallFailureUninstallRemediation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := createHelmRepository(t, ns)
	hr := remPodinfo(ns, "podinfo", repo.Name, remCrashloopValues)
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{
		Timeout:     &metav1.Duration{Duration: 6 * time.Second},
		Remediation: &helmv2.InstallRemediation{Retries: 1},
	}}
	remCreate(t, hr)

	remStep(t, "first-failure-uninstalled", func(t *testing.T) {
		env.Eventually(t, time.Minute, "first install failure remediated by uninstall", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 1 {
				return fmt.Errorf("installFailures %d, want 1", hr.Status.InstallFailures)
			}
			if err := remCondition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			if err := remCondition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason); err != nil {
				return err
			}
			return remCondition(hr, meta.ReadyCondition, metav1.ConditionFalse, "")
		})
		if hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionInstall {
			t.Errorf("lastAttemptedReleaseAction %q, want install", hr.Status.LastAttemptedReleaseAction)
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.InstallFailedReason, Contains: "Helm install failed"})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: helmv2.UninstallSucceededReason})
	})

	remStep(t, "retries-exhausted", func(t *testing.T) {
		env.Eventually(t, time.Minute, "HelmRelease stalled after the retry failed", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := remCondition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 2 {
				return fmt.Errorf("installFailures %d, want 2", hr.Status.InstallFailures)
			}
			return nil
		})
		if err := remCondition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
			t.Error(err)
		}
		if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
			t.Error(err)
		}
		if hr.Status.Failures != 2 {
			t.Errorf("failures %d, want 2", hr.Status.Failures)
		}
		// The last failure is not remediated (remediateLastFailure is unset):
		// the failed release stays in storage for inspection.
		stored := remStorage(t, ns, "podinfo")
		if len(stored) != 1 || stored[0].Release.Info.Status != "failed" {
			t.Fatalf("Helm storage after the retries: %s, want one failed release", remDescribe(stored))
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "failed" || latest.Version != stored[0].Release.Version {
			t.Errorf("latest snapshot %+v, want the failed v%d", latest, stored[0].Release.Version)
		}
	})

	remStep(t, "no-more-attempts", func(t *testing.T) {
		before := remStorage(t, ns, "podinfo")
		token := requestReconcile(t, hr)
		waitReconcileHandled(t, hr, token, 30*time.Second)
		env.Consistently(t, 4*time.Second, "a stalled release is not retried", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 2 {
				return fmt.Errorf("installFailures moved to %d", hr.Status.InstallFailures)
			}
			if err := remCondition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			return remSameStorage(t, ns, "podinfo", before)
		})
	})

	remStep(t, "new-values-install", func(t *testing.T) {
		patchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = nil })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		if hr.Status.InstallFailures != 0 || hr.Status.Failures != 0 {
			t.Errorf("failure counters not reset by the new values: installFailures %d failures %d",
				hr.Status.InstallFailures, hr.Status.Failures)
		}
		for _, typ := range []string{meta.StalledCondition, helmv2.RemediatedCondition} {
			if c := conditions.Get(hr, typ); c != nil {
				t.Errorf("%s condition still present after a successful install: %+v", typ, c)
			}
		}
		if err := remCondition(hr, helmv2.ReleasedCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason); err != nil {
			t.Error(err)
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "deployed" {
			t.Errorf("latest snapshot %+v, want deployed", latest)
		}
		if a := remPodTemplateAnnotations(t, ns, "podinfo"); a[remSimFail] != "" {
			t.Errorf("pod template still has %s=%s", remSimFail, a[remSimFail])
		}
		wantDeploymentReplicas(t, ns, "podinfo", 1)
	})
}

// TestUpgradeFailureRollback upgrades a healthy podinfo to pods that never
// become ready; the failed upgrade is rolled back to the previous release.
func TestUpgradeFailureRollback(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := createHelmRepository(t, ns)
	hr := remPodinfo(ns, "podinfo", repo.Name, `{"replicaCount":1}`)
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{
		Timeout: &metav1.Duration{Duration: 6 * time.Second},
		Remediation: &helmv2.UpgradeRemediation{
			Retries:              0,
			RemediateLastFailure: ptr.To(true),
		},
	}}
	remCreate(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
	installed := *hr.Status.History.Latest()

	patchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = jsonValues(t, remCrashloopValues) })
	env.Eventually(t, time.Minute, "failed upgrade rolled back", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		if err := remCondition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason); err != nil {
			return err
		}
		if err := remCondition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
			return err
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Version < 3 {
			return fmt.Errorf("history %s, waiting for the rollback's snapshot", remSnapshots(hr.Status.History))
		}
		return nil
	})
	if err := remCondition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason); err != nil {
		t.Error(err)
	}
	if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
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
			remSnapshots(h), installed.ChartVersion, installed.ConfigDigest)
	}
	if h[1].Version != 2 || h[1].Status == "deployed" || h[1].ConfigDigest == installed.ConfigDigest {
		t.Errorf("snapshot of the failed upgrade: %+v", h[1])
	}
	stored := remStorage(t, ns, "podinfo")
	if len(stored) != 3 {
		t.Fatalf("Helm storage: %s, want 3 revisions", remDescribe(stored))
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
		if v, ok := d.Spec.Template.Annotations[remSimFail]; ok {
			return fmt.Errorf("pod template still annotated %s=%s after the rollback", remSimFail, v)
		}
		if d.Status.ReadyReplicas != 1 || d.Status.UpdatedReplicas != 1 {
			return fmt.Errorf("Deployment ready %d updated %d", d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
		}
		return nil
	})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.UpgradeFailedReason})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: helmv2.RollbackSucceededReason})
	env.Consistently(t, 3*time.Second, "no upgrade after the remediated last failure", func(ctx context.Context) error {
		return remSameStorage(t, ns, "podinfo", stored)
	})
}

// TestInstallRetryOnFailure retries a failing install on an interval
// instead of remediating it, and installs once the values are fixed.
func TestInstallRetryOnFailure(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := createHelmRepository(t, ns)
	hr := remPodinfo(ns, "podinfo", repo.Name, remCrashloopValues)
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{
		Timeout: &metav1.Duration{Duration: 5 * time.Second},
		Strategy: &helmv2.InstallStrategy{
			Name:          string(helmv2.ActionStrategyRetryOnFailure),
			RetryInterval: &metav1.Duration{Duration: 5 * time.Second},
		},
		// Remediation settings are not used with RetryOnFailure.
		Remediation: &helmv2.InstallRemediation{Retries: 3},
	}}
	remCreate(t, hr)

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
	remStep(t, "failure-not-remediated", func(t *testing.T) {
		env.Eventually(t, time.Minute, "install failed", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			return remCondition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		})
		if err := noRemediation(context.Background()); err != nil {
			t.Fatal(err)
		}
		stored := remStorage(t, ns, "podinfo")
		if len(stored) == 0 {
			t.Fatalf("no release in storage after the failed install: it was removed")
		}
		firstFailed = stored[len(stored)-1].Release.Version
	})

	var retried int
	remStep(t, "failure-retried", func(t *testing.T) {
		// Wait for the retry to have failed and been recorded, so that the
		// values change below lands between two attempts.
		env.Eventually(t, time.Minute, "install retried over the failed release", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := noRemediation(ctx); err != nil {
				t.Fatal(err)
			}
			stored := remStorage(t, ns, "podinfo")
			if len(stored) == 0 {
				t.Fatalf("the failed release was removed from storage")
			}
			last := stored[len(stored)-1].Release
			if last.Version <= firstFailed || last.Info.Status != "failed" {
				return fmt.Errorf("storage: %s; waiting for a failed attempt after v%d", remDescribe(stored), firstFailed)
			}
			if latest := hr.Status.History.Latest(); latest == nil || latest.Version != last.Version || latest.Status != "failed" {
				return fmt.Errorf("history %s, waiting for the failed v%d", remSnapshots(hr.Status.History), last.Version)
			}
			retried = last.Version
			return nil
		})
		if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
			t.Error(err)
		}
		if env.HasEvent(t, ns, hr.Name, helmv2.UninstallSucceededReason) {
			t.Errorf("an uninstall happened although the strategy is RetryOnFailure")
		}
	})

	remStep(t, "fixed-values-install", func(t *testing.T) {
		patchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = jsonValues(t, `{"replicaCount":1}`) })
		env.Eventually(t, time.Minute, "fixed release Ready", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			// Whatever the reason, the new values deployed.
			if err := framework.ReleaseReady(hr, framework.ReleaseWant{}); err != nil {
				return err
			}
			if latest := hr.Status.History.Latest(); latest.ConfigDigest != hr.Status.LastAttemptedConfigDigest {
				return fmt.Errorf("history %s, waiting for the new values deployed", remSnapshots(hr.Status.History))
			}
			return nil
		})
		t.Logf("Ready: %s: %s", conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition))
		// As upstream, an install starts the history afresh: the failed
		// attempts stay in Helm storage, the history holds the new release.
		h := hr.Status.History
		if latest := h.Latest(); latest.Version != retried+1 || len(h) != 1 {
			t.Errorf("history %s, want only the deployed v%d", remSnapshots(h), retried+1)
		}
		stored := remStorage(t, ns, "podinfo")
		if last := stored[len(stored)-1].Release; last.Version != retried+1 || last.Info.Status != "deployed" {
			t.Errorf("Helm storage %s, want v%d deployed", remDescribe(stored), retried+1)
		}
		wantDeploymentReplicas(t, ns, "podinfo", 1)
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
				if err := remCondition(hr, helmv2.TestSuccessCondition, metav1.ConditionTrue, helmv2.TestSucceededReason); err != nil {
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
						len(hooks), names, remSnapshots(hr.Status.History))
				}
				env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: helmv2.TestSucceededReason})
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
					if err := remCondition(hr, helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason); err != nil {
						return err
					}
					if err := remCondition(hr, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.UninstallSucceededReason); err != nil {
						return err
					}
					if err := remCondition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
						return err
					}
					if hr.Status.InstallFailures == 0 {
						return fmt.Errorf("failure not counted yet")
					}
					return nil
				})
				if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
					t.Error(err)
				}
				if msg := conditions.GetMessage(hr, helmv2.TestSuccessCondition); !strings.Contains(msg, "verify-test") {
					t.Errorf("TestSuccess message %q does not name the failed test", msg)
				}
				latest := hr.Status.History.Latest()
				if latest == nil || !latest.HasTestInPhase("Failed") || latest.Status != "uninstalled" {
					t.Errorf("latest snapshot %+v, want an uninstalled release with a failed test", latest)
				}
				if hr.Status.InstallFailures != 1 {
					t.Errorf("installFailures %d, want the failed test counted once", hr.Status.InstallFailures)
				}
				if stored := remStorage(t, hr.Namespace, hr.Name); len(stored) != 0 {
					t.Errorf("Helm storage after the uninstall remediation: %s", remDescribe(stored))
				}
				env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.TestFailedReason})
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
					if err := remCondition(hr, helmv2.TestSuccessCondition, metav1.ConditionFalse, helmv2.TestFailedReason); err != nil {
						return err
					}
					// As upstream: ignored tests leave Ready to the release.
					if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason); err != nil {
						return err
					}
					if !hr.Status.History.Latest().HasBeenTested() {
						return fmt.Errorf("history %s, waiting for the tests to be recorded", remSnapshots(hr.Status.History))
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
				stored := remStorage(t, hr.Namespace, hr.Name)
				if len(stored) != 1 || stored[0].Release.Info.Status != "deployed" {
					t.Errorf("Helm storage: %s, want one deployed release", remDescribe(stored))
				}
				env.Consistently(t, 2*time.Second, "no remediation of ignored test failures", func(ctx context.Context) error {
					return remSameStorage(t, hr.Namespace, hr.Name, stored)
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
				chart := remPublish(t, "e2e-tests", "0.1.0", ns, chartserver.WithValues(map[string]any{"testFail": true}))
				repo := createHelmRepository(t, ns)
				hr = remRelease(ns, "tested", repo.Name, chart.Name, chart.Version, "")
			} else {
				repo := createHelmRepository(t, ns)
				hr = remPodinfo(ns, "podinfo", repo.Name, "")
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
			remCreate(t, hr)
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
		repo := createHelmRepository(t, ns)
		// The pods need a Secret that does not exist yet: the install times
		// out, and with no retries the release stalls.
		hr := remPodinfo(ns, "podinfo", repo.Name,
			`{"extraEnvs":[{"name":"DB_PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}]}`)
		hr.Spec.Install = &v2.Install{Install: helmv2.Install{
			Timeout:     &metav1.Duration{Duration: 5 * time.Second},
			Remediation: &helmv2.InstallRemediation{Retries: 0},
		}}
		remCreate(t, hr)
		env.Eventually(t, time.Minute, "install retries exhausted", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := remCondition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			if err := remCondition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			if hr.Status.InstallFailures != 1 {
				return fmt.Errorf("installFailures %d, want 1", hr.Status.InstallFailures)
			}
			return nil
		})
		stalled := remStorage(t, ns, "podinfo")
		if len(stalled) != 1 || stalled[0].Release.Info.Status != "failed" {
			t.Fatalf("Helm storage: %s, want one failed release", remDescribe(stalled))
		}

		// What the pods were missing appears, but a stalled release is not
		// retried by an ordinary reconcile request.
		if err := env.Client.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
			StringData: map[string]string{"password": "s3cret"},
		}); err != nil {
			t.Fatal(err)
		}
		token := requestReconcile(t, hr)
		// Every reconcile drops Stalled while it runs (Reconciling=True);
		// judge the state once the request has been handled.
		waitReconcileHandled(t, hr, token, 30*time.Second)
		env.Consistently(t, 4*time.Second, "stalled release left alone without a reset", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := remCondition(hr, meta.StalledCondition, metav1.ConditionTrue, "RetriesExceeded"); err != nil {
				return err
			}
			return remSameStorage(t, ns, "podinfo", stalled)
		})

		reset := strconv.FormatInt(time.Now().UnixNano(), 10)
		remAnnotate(t, hr, map[string]string{meta.ReconcileRequestAnnotation: reset, helmv2.ResetRequestAnnotation: reset})
		env.Eventually(t, time.Minute, "reset release installed", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.LastHandledResetAt != reset {
				return fmt.Errorf("lastHandledResetAt %q, want %q", hr.Status.LastHandledResetAt, reset)
			}
			return remCondition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.InstallSucceededReason)
		})
		if hr.Status.InstallFailures != 0 || hr.Status.Failures != 0 {
			t.Errorf("failure counters after the reset and install: installFailures %d failures %d",
				hr.Status.InstallFailures, hr.Status.Failures)
		}
		if c := conditions.Get(hr, meta.StalledCondition); c != nil {
			t.Errorf("Stalled condition still present: %+v", c)
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Status != "deployed" || latest.Version != 2 {
			t.Errorf("latest snapshot %+v, want v2 deployed over the failed v1", latest)
		}
		wantDeploymentReplicas(t, ns, "podinfo", 1)
	})

	t.Run("force-upgrades-in-sync-release", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		repo := createHelmRepository(t, ns)
		hr := remPodinfo(ns, "podinfo", repo.Name, `{"replicaCount":1}`)
		remCreate(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		installed := *hr.Status.History.Latest()

		// A force token that does not match requestedAt is recorded but
		// does nothing.
		mismatched := "force-" + strconv.FormatInt(time.Now().UnixNano(), 10)
		request := strconv.FormatInt(time.Now().UnixNano(), 10)
		remAnnotate(t, hr, map[string]string{meta.ReconcileRequestAnnotation: request, meta.ForceRequestAnnotation: mismatched})
		waitReconcileHandled(t, hr, request, 30*time.Second)
		if got := releaseRevisions(t, ns, "podinfo"); got != 1 {
			t.Fatalf("%d Helm revisions after a force token that does not match requestedAt, want 1", got)
		}

		force := strconv.FormatInt(time.Now().UnixNano(), 10)
		remAnnotate(t, hr, map[string]string{meta.ReconcileRequestAnnotation: force, meta.ForceRequestAnnotation: force})
		env.Eventually(t, time.Minute, "forced upgrade done", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.LastHandledForceAt != force {
				return fmt.Errorf("lastHandledForceAt %q, want %q", hr.Status.LastHandledForceAt, force)
			}
			if err := remCondition(hr, meta.ReadyCondition, metav1.ConditionTrue, helmv2.UpgradeSucceededReason); err != nil {
				return err
			}
			// Conditions are written in a request before the rest of the
			// status: wait for the history too.
			if latest := hr.Status.History.Latest(); latest == nil || latest.Version < 2 {
				return fmt.Errorf("history %s, waiting for the forced revision", remSnapshots(hr.Status.History))
			}
			return nil
		})
		latest := hr.Status.History.Latest()
		if latest.Version != 2 {
			t.Fatalf("latest snapshot is v%d after one force request, want v2 (history %s)", latest.Version, remSnapshots(hr.Status.History))
		}
		if latest.ChartVersion != installed.ChartVersion || latest.ConfigDigest != installed.ConfigDigest {
			t.Errorf("forced upgrade changed chart or values: %+v, installed %+v", latest, installed)
		}
		if got := releaseRevisions(t, ns, "podinfo"); got != 2 {
			t.Errorf("%d Helm revisions after the forced upgrade, want 2", got)
		}

		// The force token is handled once: a later reconcile does nothing.
		again := requestReconcile(t, hr)
		waitReconcileHandled(t, hr, again, 30*time.Second)
		if got := releaseRevisions(t, ns, "podinfo"); got != 2 {
			t.Errorf("%d Helm revisions after another reconcile request, want 2 (force handled once)", got)
		}
	})
}

// ---- helpers shared by remediation_test.go and options_test.go ----

// remTestdata is where the small test charts live.
var remTestdata = framework.ChartsDir

// remStep runs a subtest and stops the parent when it fails: later steps
// build on earlier ones and would only time out.
func remStep(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// remPublish publishes framework.ChartsDir/<dir> under base-<ns>, a version no
// other test uses.
func remPublish(t *testing.T, dir, base, ns string, opts ...chartserver.Option) chartserver.ChartRef {
	t.Helper()
	opts = append(opts, chartserver.WithVersion(base+"-"+ns))
	ref, err := env.Charts.AddChart(filepath.Join(remTestdata, dir), opts...)
	if err != nil {
		t.Fatalf("publishing %s: %v", dir, err)
	}
	return ref
}

// remRelease returns a HelmRelease of chart@version from the HelmRepository
// repo, with a long interval so that only changes make it act.
func remRelease(ns, name, repo, chart, version, values string) *v2.HelmRelease {
	hr := &v2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v2.HelmReleaseSpec{HelmReleaseSpec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: 10 * time.Minute},
			Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
				Chart:     chart,
				Version:   version,
				SourceRef: helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repo},
				Interval:  &metav1.Duration{Duration: time.Minute},
			}},
		}},
	}
	if values != "" {
		hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(values)}
	}
	return hr
}

func remPodinfo(ns, name, repo, values string) *v2.HelmRelease {
	return remRelease(ns, name, repo, env.Podinfo.Name, env.Podinfo.Version, values)
}

func remCreate(t *testing.T, hr *v2.HelmRelease) {
	t.Helper()
	if err := env.Client.Create(context.Background(), hr); err != nil {
		t.Fatalf("creating HelmRelease %s: %v", hr.Name, err)
	}
}

// remCondition returns nil when the condition has the status and, unless
// reason is empty, the reason.
func remCondition(hr *v2.HelmRelease, typ string, status metav1.ConditionStatus, reason string) error {
	c := conditions.Get(hr, typ)
	if c == nil {
		return fmt.Errorf("no %s condition (conditions: %s)", typ, remConditions(hr))
	}
	if c.Status != status || (reason != "" && c.Reason != reason) {
		want := string(status)
		if reason != "" {
			want += "/" + reason
		}
		return fmt.Errorf("%s=%s/%s %q, want %s", typ, c.Status, c.Reason, c.Message, want)
	}
	return nil
}

func remConditions(hr *v2.HelmRelease) string {
	var out []string
	for _, c := range hr.Status.Conditions {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(out, " ")
}

func remSnapshots(h helmv2.Snapshots) string {
	var out []string
	for _, s := range h {
		entry := fmt.Sprintf("v%d %s (%s) %s@%s config %s", s.Version, s.Status, s.Action, s.ChartName, s.ChartVersion, s.ConfigDigest)
		if s.TestHooks != nil {
			entry += fmt.Sprintf(" %d test hooks", len(s.GetTestHooks()))
			for name, h := range s.GetTestHooks() {
				entry += fmt.Sprintf(" %s=%s", name, h.Phase)
			}
		}
		out = append(out, entry)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// remStored is a Helm storage Secret with the release it holds.
type remStored struct {
	Secret  corev1.Secret
	Release releasev1.Release
}

// remStorage returns the Helm storage Secrets of a release in ns, oldest
// revision first, with their decoded releases.
func remStorage(t *testing.T, ns, release string) []remStored {
	t.Helper()
	var list corev1.SecretList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{"owner": "helm", "name": release}); err != nil {
		t.Fatal(err)
	}
	out := make([]remStored, 0, len(list.Items))
	for _, s := range list.Items {
		rel, err := remDecodeRelease(s.Data["release"])
		if err != nil {
			t.Fatalf("decoding Helm storage Secret %s: %v", s.Name, err)
		}
		out = append(out, remStored{Secret: s, Release: *rel})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Release.Version < out[j].Release.Version })
	return out
}

// remDecodeRelease reads a release the way Helm's Secret driver stores it:
// base64 of gzipped JSON.
func remDecodeRelease(data []byte) (*releasev1.Release, error) {
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	rel := &releasev1.Release{}
	if err := json.Unmarshal(raw, rel); err != nil {
		return nil, err
	}
	return rel, nil
}

func remDescribe(stored []remStored) string {
	var out []string
	for _, s := range stored {
		r := s.Release
		status := ""
		if r.Info != nil {
			status = string(r.Info.Status)
		}
		out = append(out, fmt.Sprintf("v%d %s", r.Version, status))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// remSameStorage returns an error when the release's storage differs from
// before in revisions or their statuses.
func remSameStorage(t *testing.T, ns, release string, before []remStored) error {
	t.Helper()
	now := remStorage(t, ns, release)
	if a, b := remDescribe(now), remDescribe(before); a != b {
		return fmt.Errorf("Helm storage changed from %s to %s", b, a)
	}
	return nil
}

func remPodTemplateAnnotations(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.Get(context.Background(), d, ns, name); err != nil {
		t.Fatalf("Deployment %s: %v", name, err)
	}
	return d.Spec.Template.Annotations
}

// remAnnotate merges annotations into the HelmRelease's metadata.
func remAnnotate(t *testing.T, hr *v2.HelmRelease, annotations map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(context.Background(), hr, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("annotating HelmRelease %s: %v", hr.Name, err)
	}
}
