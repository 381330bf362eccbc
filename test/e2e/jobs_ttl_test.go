package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// jobsTTLChart is a Deployment, an ordinary Job and a post-install /
// post-upgrade hook Job, both Jobs with ttlSecondsAfterFinished: 0: the
// TTL controller deletes each as soon as it finishes, often before a wait
// sees it finish.
const jobsTTLChart = "jobs-ttl"

// jobsTTLTimeout is the action timeout of these releases: short, so that a
// wait stuck on a deleted Job shows as a failed release, not a slow one.
const jobsTTLTimeout = 30 * time.Second

// TestJobsWithTTLInstallAndUpgrade: Jobs that delete themselves once
// finished count as done, hook or not, under every wait: the release
// installs and upgrades Ready under beforeHooks, afterHooks and ordered,
// as upstream installs and upgrades it.
func TestJobsWithTTLInstallAndUpgrade(t *testing.T) {
	t.Parallel()
	for _, tc := range everyWaitMethod {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			env.Oracle(t, ns)
			repo := env.HelmRepository(t, ns)
			chart := env.PublishChart(t, jobsTTLChart, "0.1.0", ns)
			hr := framework.WithWaitStrategy(framework.Release(ns, "ttl", repo.Name, chart.Name, chart.Version, ""), tc.strategy, jobsTTLTimeout)
			tc.orderIfAsked(hr)
			env.Create(t, hr)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

			env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"message":"two"}`) })
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
		})
	}
}

// TestJobsWithTTLFailedJobFails: a Job that failed and was then deleted by
// its TTL is still a failure, under every wait. The Deployment becomes
// ready only after the Job has failed and is gone, so the wait decides on
// a Job it can no longer read: the install fails on the Job, well before
// the timeout, rather than succeeding or running into the timeout.
//
// Under afterHooks the post hook runs for 8 s before the readiness wait
// starts: the Job fails and is deleted before that wait ever looks, and
// only the tracking from its apply on knows how it ended. Under ordered,
// the Job is in group seed with readiness expressions (polled every 2 s),
// and the ConfigMap of group app, which depends on seed, must never be
// applied.
func TestJobsWithTTLFailedJobFails(t *testing.T) {
	t.Parallel()
	for _, tc := range everyWaitMethod {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			repo := env.HelmRepository(t, ns)
			chart := env.PublishChart(t, jobsTTLChart, "0.1.0", ns)
			const timeout = 90 * time.Second
			values := `{"setupFail":true,"hookDelay":"8s"}`
			if tc.ordered {
				values = `{"setupFail":true,"hookDelay":"8s","readinessAnnotations":true}`
			}
			hr := framework.WithWaitStrategy(framework.Release(ns, "ttl", repo.Name, chart.Name, chart.Version, values), tc.strategy, timeout)
			tc.orderIfAsked(hr)
			start := time.Now()
			env.Create(t, hr)
			env.WaitNotReady(t, hr, helmv2.InstallFailedReason, "Job/"+ns+"/ttl-setup")
			if took := time.Since(start); took > timeout/2 {
				t.Errorf("the install failed after %s, near its timeout of %s: the wait did not decide on the failed Job", took.Round(time.Second), timeout)
			}
			env.WantStorage(t, ns, "ttl", "failed")
			if tc.ordered {
				err := env.Get(context.Background(), &corev1.ConfigMap{}, ns, "ttl-after-seed")
				if !apierrors.IsNotFound(err) {
					t.Errorf("the ConfigMap of group app, which depends on the failed group seed: %v, want NotFound", err)
				}
			}
		})
	}
}

// TestJobsWithTTLFailedJobFailsAcrossARestart: under afterHooks, the
// controller is killed while the 8-second post hook runs, after the
// ordinary Job has failed and deleted itself, and started again. The
// interrupted install is retried (the new run applies the Job again and
// sees it fail), or its wait resumes with no record of how the Job ended:
// either way the release must not become Ready.
func TestJobsWithTTLFailedJobFailsAcrossARestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	chart := env.PublishChart(t, jobsTTLChart, "0.1.0", ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "ttl-restart-" + rand.String(8)})
	hr := framework.Sharded(framework.WithWaitStrategy(framework.Release(ns, "ttl", repo.Name, chart.Name, chart.Version,
		`{"setupFail":true,"hookDelay":"8s"}`), v2.AfterHooks, 90*time.Second), ctl)
	env.Create(t, hr)
	env.Eventually(t, time.Minute, "the post hook running", func(ctx context.Context) error {
		return env.Get(ctx, &batchv1.Job{}, ns, "ttl-hook")
	})
	time.Sleep(4 * time.Second) // the setup Job has failed and is gone by now
	if err := ctl.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	// The unlocked install counts as failed, so the retry is an install or
	// an upgrade as remediation has it; either must fail on the Job.
	env.Eventually(t, time.Minute, "Ready=False naming the failed Job", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
			return err
		}
		if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "Job/"+ns+"/ttl-setup status: 'Failed'") {
			return fmt.Errorf("Ready message %q does not name the failed Job", msg)
		}
		return nil
	})
}
