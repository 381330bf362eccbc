package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestGracefulShutdown stops a controller in the middle of an install (Helm
// is waiting for pods that take minutes to become ready), once with SIGTERM
// and once through the OOMWatch gate on a fake memory cgroup. Either way the
// process exits cleanly within seconds, not after the wait or the
// graceful-shutdown timeout, and Helm has marked the interrupted revision
// failed: nothing is left pending for the next controller to unlock.
func TestGracefulShutdown(t *testing.T) {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	for _, how := range []string{"sigterm", "oomwatch"} {
		t.Run(how, func(t *testing.T) {
			cgroup := t.TempDir()
			limitFile, usageFile := filepath.Join(cgroup, "memory.max"), filepath.Join(cgroup, "memory.current")
			framework.WriteFile(t, limitFile, "1000000000")
			framework.WriteFile(t, usageFile, "100000000") // 10%
			var args []string
			if how == "oomwatch" {
				args = []string{"--feature-gates=OOMWatch=true", "--oom-watch-interval=100ms",
					"--oom-watch-max-memory-path=" + limitFile, "--oom-watch-current-memory-path=" + usageFile}
			}
			ctl := env.StartShard(t, ns, framework.ControllerOptions{
				Shard: "shutdown-" + rand.String(6),
				// With leader election, as a deployment runs it.
				LeaderElection: true,
				Args:           append(args, "--graceful-shutdown-timeout=2m"),
			})
			// When the test ends the controller uninstalls the release: a
			// stopped one comes back for that, without the OOM watch (the
			// fake cgroup still reads 99%).
			t.Cleanup(func() {
				if ctl.Running() != nil {
					restartWithoutOOMWatch(t, ctl)
				}
			})
			hr := framework.Sharded(env.PodinfoRelease(ns, "stop-"+how, repo.Name, ""), ctl)
			hr.Spec.Values = framework.JSON(`{"podAnnotations":{"sim.afterhooks.io/delay":"40s"}}`)
			env.Create(t, hr)

			env.Eventually(t, 2*time.Minute, hr.Name+".v1 pending-install (Helm waiting for the pods)", func(ctx context.Context) error {
				framework.MustRun(t, ctl)
				stored := env.Storage(t, ns, hr.Name)
				if len(stored) != 1 || stored[0].Release.Info.Status != "pending-install" {
					return fmt.Errorf("Helm storage %s", framework.Describe(stored))
				}
				return nil
			})
			time.Sleep(2 * time.Second) // well inside the readiness wait

			stopped := time.Now()
			if how == "sigterm" {
				if err := ctl.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else {
				framework.WriteFile(t, usageFile, "990000000") // 99%
			}
			if err := ctl.WaitExit(time.Minute); err != nil {
				t.Fatalf("after the %s shutdown: %v", how, err)
			}
			t.Logf("%s: controller exited cleanly %s after the trigger", how, time.Since(stopped).Round(10*time.Millisecond))

			time.Sleep(300 * time.Millisecond) // requests on the wire land
			stored := env.Storage(t, ns, hr.Name)
			if len(stored) != 1 || stored[0].Release.Info.Status != "failed" || stored[0].Secret.Labels["status"] != "failed" {
				t.Errorf("Helm storage %s, want v1 failed: the interrupted install must not stay pending", framework.Describe(stored))
			} else {
				t.Logf("storage: v1 %s %q", stored[0].Release.Info.Status, stored[0].Release.Info.Description)
			}
			log, err := ctl.Log()
			if err != nil {
				t.Fatal(err)
			}
			if how == "oomwatch" {
				for _, want := range []string{"memory usage reached the threshold", "stopped before running out of memory"} {
					if !strings.Contains(log, want) {
						t.Errorf("controller log lacks %q", want)
					}
				}
			}
			if err := env.Get(context.Background(), hr, ns, hr.Name); err == nil {
				t.Logf("HelmRelease after the shutdown: %s; history %s", framework.Conditions(hr), framework.Snapshots(hr.Status.History))
			}

			// The next controller takes the failed revision over without help.
			restartWithoutOOMWatch(t, ctl)
			env.Eventually(t, 3*time.Minute, hr.Name+" Ready after the restart", func(ctx context.Context) error {
				framework.MustRun(t, ctl)
				if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				if err := framework.Ready(hr); err != nil {
					return err
				}
				if hr.Status.ObservedGeneration != hr.Generation {
					return fmt.Errorf("observedGeneration %d, generation %d", hr.Status.ObservedGeneration, hr.Generation)
				}
				return nil
			})
			t.Logf("after the restart: %s; history %s; storage %s", framework.Conditions(hr), framework.Snapshots(hr.Status.History),
				framework.Describe(env.Storage(t, ns, hr.Name)))
		})
	}
}

// restartWithoutOOMWatch starts ctl again without the OOMWatch gate.
func restartWithoutOOMWatch(t *testing.T, ctl *framework.Controller) {
	t.Helper()
	ctl.Configure(func(o *framework.ControllerOptions) {
		o.Args = slices.DeleteFunc(slices.Clone(o.Args), func(a string) bool {
			return strings.HasPrefix(a, "--feature-gates=OOMWatch")
		})
	})
	framework.Restart(t, ctl)
}
