package e2e

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

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
// its TTL is still a failure. The Deployment becomes ready only after the
// Job has failed and is gone, so the wait decides on a Job it saw fail but
// can no longer read: the install fails on the Job, well before the
// timeout, rather than succeeding or running into the timeout.
func TestJobsWithTTLFailedJobFails(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	chart := env.PublishChart(t, jobsTTLChart, "0.1.0", ns)
	const timeout = 90 * time.Second
	hr := framework.WithWaitStrategy(framework.Release(ns, "ttl", repo.Name, chart.Name, chart.Version,
		`{"setupFail":true}`), v2.BeforeHooks, timeout)
	start := time.Now()
	env.Create(t, hr)
	env.WaitNotReady(t, hr, helmv2.InstallFailedReason, "Job/"+ns+"/ttl-setup not ready. status: Failed")
	if took := time.Since(start); took > timeout/2 {
		t.Errorf("the install failed after %s, near its timeout of %s: the wait did not decide on the failed Job", took.Round(time.Second), timeout)
	}
	env.WantStorage(t, ns, "ttl", "failed")
}
