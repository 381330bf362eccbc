package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// Upstream Flux helm-controller (v1.6.4, the version Flux v2.9.5 ships) is
// built from its Go module by hack/tools/build.sh. These tests swap
// controllers on one release, as a user does who adopts this controller or
// goes back: a shard label hands the release from one controller process
// to the other, and the shared e2e controller never sees it.
//
// Going back also reverts the CRD to upstream's, which prunes waitStrategy;
// upstream's Go types ignore that field anyway, so serving our CRD here
// changes nothing upstream reads.

// TestTakeoverFromUpstream: upstream installs a release and writes its
// status; ours adopts it as it is, without a new Helm revision.
func TestTakeoverFromUpstream(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	shard := "upstream-" + rand.String(8)
	upstream := env.StartShard(t, ns, framework.ControllerOptions{Shard: shard, Binary: framework.UpstreamBinary(t)})
	framework.EnsureRunning(t, upstream)

	hr := framework.Sharded(env.PodinfoRelease(ns, "podinfo", repo.Name, ""), upstream)
	hr.Spec.Values = framework.JSON(`{"replicaCount": 1}`)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 2 * time.Minute})
	if n := len(env.Storage(t, ns, "podinfo")); n != 1 {
		t.Fatalf("upstream made %d Helm revisions, want 1", n)
	}
	upstreamHistory := hr.Status.History
	// Dashboards filter controller-runtime's series on the controller
	// label; ours must use upstream's value (TestMetrics checks ours).
	series := regexp.MustCompile(`(?m)^controller_runtime_reconcile_total\{controller="helmrelease",result="requeue_after"\} [1-9]`)
	if body := framework.Scrape(t, upstream.MetricsURL()); !series.MatchString(body) {
		t.Errorf("upstream's metrics have no controller_runtime_reconcile_total{controller=\"helmrelease\"}:\n%s", grepLines(body, "controller_runtime_reconcile_total"))
	}
	// Stopped, it leaves the release to ours: its cleanup has nothing to
	// uninstall.
	if err := upstream.Stop(); err != nil {
		t.Fatalf("stopping upstream: %v", err)
	}

	// Ours (the shared controller) takes over once the label is gone; the
	// request token shows when it has reconciled the release.
	token := time.Now().Format(time.RFC3339Nano)
	handOver(t, hr, nil, token)
	env.Eventually(t, time.Minute, "ours reconciled the release", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		if hr.Status.LastHandledReconcileAt != token {
			return fmt.Errorf("lastHandledReconcileAt %q, want %q", hr.Status.LastHandledReconcileAt, token)
		}
		return nil
	})
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: time.Minute})
	env.Consistently(t, 5*time.Second, "no new Helm revision after the takeover", func(ctx context.Context) error {
		if n := len(env.Storage(t, ns, "podinfo")); n != 1 {
			return fmt.Errorf("%d Helm revisions in storage, want 1", n)
		}
		return nil
	})
	if err := env.Get(context.Background(), hr, ns, hr.Name); err != nil {
		t.Fatal(err)
	}
	if len(hr.Status.History) != 1 || hr.Status.History[0].Digest != upstreamHistory[0].Digest {
		t.Errorf("history after the takeover %+v, upstream wrote %+v", hr.Status.History, upstreamHistory)
	}
}

// TestGoBackToUpstream: a release that afterHooks holds pending when the
// controller is swapped for upstream must end deployed, never stuck.
func TestGoBackToUpstream(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, framework.HookDelayChart, "0.1.0", ns)
	for _, stop := range []string{"sigterm", "sigkill"} {
		t.Run(stop, func(t *testing.T) {
			ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "goback-" + stop + "-" + rand.String(6)})
			framework.EnsureRunning(t, ctl)
			name := "held-" + stop
			// Slow pods keep the revision in its readiness wait long
			// enough to swap controllers in the middle of it.
			hr := framework.AfterHooksRelease(ctl, ns, name, repo.Name, ref, `{"podAnnotations":{"sim.afterhooks.io/delay":"20s"}}`)
			hr.Spec.Install.Timeout = &metav1.Duration{Duration: 2 * time.Minute}
			env.Create(t, hr)
			env.Eventually(t, time.Minute, name+".v1 held pending by afterHooks", func(ctx context.Context) error {
				framework.MustRun(t, ctl)
				return framework.HeldInstall(env.Storage(t, ns, name), true)
			})
			if stop == "sigterm" {
				if err := ctl.Stop(); err != nil {
					t.Fatalf("stopping ours: %v", err)
				}
			} else {
				framework.Kill(t, ctl)
			}
			if err := framework.HeldInstall(env.Storage(t, ns, name), true); err != nil {
				t.Fatalf("after stopping ours: %v", err)
			}

			ctl.Configure(func(o *framework.ControllerOptions) { o.Binary = framework.UpstreamBinary(t) })
			framework.Restart(t, ctl)
			start := time.Now()
			env.Eventually(t, 3*time.Minute, "upstream ends the held release deployed", func(ctx context.Context) error {
				framework.MustRun(t, ctl)
				if err := env.Get(ctx, hr, ns, name); err != nil {
					return err
				}
				ready := conditions.Get(hr, meta.ReadyCondition)
				if ready == nil || ready.Status != metav1.ConditionTrue || hr.Status.ObservedGeneration != hr.Generation {
					return fmt.Errorf("Ready %+v; storage %s", ready, framework.Describe(env.Storage(t, ns, name)))
				}
				stored := env.Storage(t, ns, name)
				latest := stored[len(stored)-1].Release
				if latest.Info.Status != "deployed" {
					return fmt.Errorf("storage %s, want the latest revision deployed", framework.Describe(stored))
				}
				return nil
			})
			env.WantNotPending(t, ns, name)
			if conditions.IsStalled(hr) {
				t.Errorf("upstream left the release Stalled: %+v", conditions.Get(hr, meta.StalledCondition))
			}
			ready := conditions.Get(hr, meta.ReadyCondition)
			t.Logf("upstream: Ready/%s %q after %s; storage %s; history %d entries",
				ready.Reason, ready.Message, time.Since(start).Round(time.Second),
				framework.Describe(env.Storage(t, ns, name)), len(hr.Status.History))
			env.WantDeploymentAvailable(t, ns, name)
		})
	}
}

// handOver replaces the HelmRelease's labels and requests a reconcile with
// token.
func handOver(t *testing.T, hr *v2.HelmRelease, labels map[string]string, token string) {
	t.Helper()
	ctx := context.Background()
	if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
		t.Fatal(err)
	}
	hr.Labels = labels
	if hr.Annotations == nil {
		hr.Annotations = map[string]string{}
	}
	hr.Annotations[meta.ReconcileRequestAnnotation] = token
	if err := env.Client.Update(ctx, hr); err != nil {
		t.Fatalf("relabelling %s: %v", hr.Name, err)
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
