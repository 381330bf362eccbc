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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestAfterHooksCrashSafety kills the controller with SIGKILL in the middle
// of an afterHooks install and starts a new one:
//
//   - during the readiness wait (the post hook ran, the revision is pending
//     with the afterHooks marker), the new controller resumes the wait: the
//     same revision ends deployed and the hook does not run again;
//   - during the post hook, the new controller unlocks the interrupted
//     revision and installs again, without counting a failure.
//
// The HelmReleases are in a shard of their own, so only this test's
// controller acts on them and the shared one keeps running.
func TestAfterHooksCrashSafety(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, framework.HookDelayChart, "0.1.0", ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "crash-" + rand.String(8)})

	// Each run kills at a different point, counted from when the window
	// opens; all of them well inside it.
	offsets := []time.Duration{0, 1500 * time.Millisecond, 3 * time.Second}
	for i, offset := range offsets {
		t.Run(fmt.Sprintf("kill-during-readiness-wait-%d", i+1), func(t *testing.T) {
			killDuringReadinessWait(t, ctl, ns, repo.Name, ref, fmt.Sprintf("wait-%d", i+1), offset)
		})
	}
	for i, offset := range offsets {
		t.Run(fmt.Sprintf("kill-during-post-hook-%d", i+1), func(t *testing.T) {
			killDuringPostHook(t, ctl, ns, repo.Name, ref, fmt.Sprintf("hook-%d", i+1), offset)
		})
	}

	// The shared controller left the shard alone.
	if log, err := env.Controller.Log(); err != nil {
		t.Errorf("reading the e2e controller log: %v", err)
	} else if strings.Contains(log, ns) {
		t.Errorf("the e2e controller's log mentions %s: it acted on HelmReleases of another shard", ns)
	}
}

// killDuringReadinessWait installs with slow application pods, kills the
// controller once the revision is held for its readiness wait, and checks
// the next controller finishes that wait on the same revision.
func killDuringReadinessWait(t *testing.T, ctl *framework.Controller, ns, repo string, ref chartserver.ChartRef, name string, offset time.Duration) {
	framework.EnsureRunning(t, ctl)
	hr := framework.AfterHooksRelease(ctl, ns, name, repo, ref, `{"podAnnotations":{"sim.afterhooks.io/delay":"8s"}}`)
	env.Create(t, hr)

	env.Eventually(t, time.Minute, name+".v1 pending-install with the afterHooks marker", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		return framework.HeldInstall(env.Storage(t, ns, name), true)
	})
	time.Sleep(offset)
	framework.Kill(t, ctl)

	// Nothing writes the storage now: it shows where the controller died.
	stored := env.Storage(t, ns, name)
	if err := framework.HeldInstall(stored, true); err != nil {
		t.Fatalf("after the kill: %v; the kill came after the readiness wait ended", err)
	}
	t.Logf("killed during the readiness wait: v1 %q", stored[0].Release.Info.Description)
	job := &batchv1.Job{}
	if err := env.Get(context.Background(), job, ns, name+"-create-creds"); err != nil {
		t.Fatalf("hook Job: %v", err)
	}

	framework.Restart(t, ctl)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	env.WantStorage(t, ns, name, "deployed")
	env.WantNotPending(t, ns, name)
	if hr.Status.InstallFailures != 0 || hr.Status.Failures != 0 {
		t.Errorf("installFailures %d, failures %d, want 0", hr.Status.InstallFailures, hr.Status.Failures)
	}
	env.WaitEvent(t, ns, name, framework.EventWant{
		Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
		Contains: fmt.Sprintf("Resuming the readiness wait of %s.v1 after a restart", name),
	})
	env.WantSecret(t, ns, name+"-creds")
	env.WantDeploymentAvailable(t, ns, name)

	// The hook ran once: its Job (delete policy before-hook-creation, so a
	// second run would replace it) is the one from before the kill, and it
	// has had one pod.
	after := &batchv1.Job{}
	if err := env.Get(context.Background(), after, ns, job.Name); err != nil {
		t.Fatalf("hook Job: %v", err)
	}
	if after.UID != job.UID || !after.CreationTimestamp.Equal(&job.CreationTimestamp) {
		t.Errorf("hook Job %s was recreated after the restart (uid %s created %s, before the kill uid %s created %s)",
			job.Name, after.UID, after.CreationTimestamp, job.UID, job.CreationTimestamp)
	}
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Errorf("hook Job %s has %d pods, want 1", job.Name, len(pods.Items))
	}
	if hooks := stored[0].Release.Hooks; len(hooks) == 1 {
		final := env.Storage(t, ns, name)
		if len(final) == 1 && len(final[0].Release.Hooks) == 1 &&
			!final[0].Release.Hooks[0].LastRun.StartedAt.Equal(hooks[0].LastRun.StartedAt) {
			t.Errorf("hook last run started %s, before the kill %s: the hook ran again",
				final[0].Release.Hooks[0].LastRun.StartedAt, hooks[0].LastRun.StartedAt)
		}
	}
}

// killDuringPostHook installs with a slow post hook, kills the controller
// while the hook Job runs, and checks the next controller gets the release
// deployed without counting the interruption as a failure.
func killDuringPostHook(t *testing.T, ctl *framework.Controller, ns, repo string, ref chartserver.ChartRef, name string, offset time.Duration) {
	framework.EnsureRunning(t, ctl)
	hr := framework.AfterHooksRelease(ctl, ns, name, repo, ref, `{"hookDelay":"6s"}`)
	env.Create(t, hr)

	job := &batchv1.Job{}
	env.Eventually(t, time.Minute, "hook Job "+name+"-create-creds running", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		if err := env.Get(ctx, job, ns, name+"-create-creds"); err != nil {
			return err
		}
		if jobFinished(job) {
			t.Fatalf("hook Job %s finished before the test saw it running: %+v", job.Name, job.Status)
		}
		return framework.HeldInstall(env.Storage(t, ns, name), false)
	})
	time.Sleep(offset)
	framework.Kill(t, ctl)

	stored := env.Storage(t, ns, name)
	if err := framework.HeldInstall(stored, false); err != nil {
		t.Fatalf("after the kill: %v; the kill came after the post hook", err)
	}
	if err := env.Get(context.Background(), job, ns, job.Name); err != nil {
		t.Fatalf("hook Job: %v", err)
	}
	t.Logf("killed during the post hook: v1 %q, hook Job active %d, succeeded %d",
		stored[0].Release.Info.Description, job.Status.Active, job.Status.Succeeded)

	framework.Restart(t, ctl)
	env.Eventually(t, 90*time.Second, "HelmRelease "+name+" Ready with a deployed revision", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		if err := env.Get(ctx, hr, ns, name); err != nil {
			return err
		}
		// Whatever the reason: the test asks for a deployed revision.
		return framework.ReleaseReady(hr, framework.ReleaseWant{})
	})
	t.Logf("Ready %s: %s; storage %s; history %s",
		conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition),
		framework.Describe(env.Storage(t, ns, name)), framework.Snapshots(hr.Status.History))

	final := env.Storage(t, ns, name)
	if n := len(final); n == 0 || final[n-1].Release.Info.Status != "deployed" || final[n-1].Secret.Labels["status"] != "deployed" {
		t.Errorf("Helm storage %s, want the latest revision deployed", framework.Describe(final))
	} else if latest := hr.Status.History.Latest(); latest.Version != final[n-1].Release.Version {
		t.Errorf("latest snapshot v%d, latest stored revision v%d", latest.Version, final[n-1].Release.Version)
	}
	env.WantNotPending(t, ns, name)
	if hr.Status.InstallFailures != 0 {
		t.Errorf("installFailures %d, want 0: a restart is not a failure (failures %d)", hr.Status.InstallFailures, hr.Status.Failures)
	}
	env.WantSecret(t, ns, name+"-creds")
	env.WantDeploymentAvailable(t, ns, name)
}

// jobFinished tells whether the Job completed or failed.
func jobFinished(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return job.Status.Succeeded > 0 || job.Status.Failed > 0
}

// TestAfterHooksResumeAfterSpecChange: v2 is held for its readiness wait
// (its pods are slow) when the controller is killed; the values change
// before a controller runs again. The new controller supersedes v2 with v3
// instead of resuming v2 and charging its fate to the new values: no stall,
// no remediation, v3 deployed, v2 failed.
func TestAfterHooksResumeAfterSpecChange(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.Oracle(t, ns)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, framework.HookDelayChart, "0.1.0", ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "respec-" + rand.String(8)})
	framework.EnsureRunning(t, ctl)
	const name = "respec"
	hr := framework.AfterHooksRelease(ctl, ns, name, repo.Name, ref, `{"message":"one"}`)
	hr.Spec.Upgrade = &v2.Upgrade{
		Upgrade: helmv2.Upgrade{
			Timeout:     &metav1.Duration{Duration: 2 * time.Minute},
			Remediation: &helmv2.UpgradeRemediation{Retries: 0},
		},
		WaitStrategy: v2.AfterHooks,
	}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
		hr.Spec.Values = framework.JSON(`{"message":"two","podAnnotations":{"sim.afterhooks.io/delay":"90s"}}`)
	})
	env.Eventually(t, time.Minute, name+".v2 held pending by afterHooks", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		stored := env.Storage(t, ns, name)
		if len(stored) != 2 || stored[1].Release.Info.Status != "pending-upgrade" ||
			!strings.HasPrefix(stored[1].Release.Info.Description, framework.AfterHooksMarker) {
			return fmt.Errorf("Helm storage %s, want v2 pending-upgrade with the afterHooks marker", framework.Describe(stored))
		}
		return nil
	})
	framework.Kill(t, ctl)

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"message":"three"}`) })
	framework.Restart(t, ctl)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 3})
	env.WantStorage(t, ns, name, "superseded", "failed", "deployed")
	if a := env.PodTemplateAnnotations(t, ns, name); a["e2e.afterhooks.io/message"] != "three" {
		t.Errorf("pod template annotations %v, want the values of v3", a)
	}
	if hr.Status.UpgradeFailures != 0 || hr.Status.Failures != 0 || conditions.IsStalled(hr) {
		t.Errorf("upgradeFailures %d, failures %d, stalled %v: v2's fate was charged to the new values",
			hr.Status.UpgradeFailures, hr.Status.Failures, conditions.IsStalled(hr))
	}
	for _, reason := range []string{helmv2.RollbackSucceededReason, helmv2.UninstallSucceededReason} {
		if env.HasEvent(t, ns, name, reason) {
			t.Errorf("a %s event: the superseded revision was remediated", reason)
		}
	}
}
