package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
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
	repo := createHelmRepository(t, ns)
	for _, how := range []string{"sigterm", "oomwatch"} {
		t.Run(how, func(t *testing.T) {
			cgroup := t.TempDir()
			limitFile, usageFile := filepath.Join(cgroup, "memory.max"), filepath.Join(cgroup, "memory.current")
			writeFile(t, limitFile, "1000000000")
			writeFile(t, usageFile, "100000000") // 10%
			var args []string
			if how == "oomwatch" {
				args = []string{"--feature-gates=OOMWatch=true", "--oom-watch-interval=100ms",
					"--oom-watch-max-memory-path=" + limitFile, "--oom-watch-current-memory-path=" + usageFile}
			}
			ctl := startShard(t, "shutdown-"+rand.String(6), append(args, "--graceful-shutdown-timeout=2m")...)
			hr := podinfoRelease(ns, "stop-"+how, repo)
			hr.Labels = map[string]string{crashShardLabel: ctl.shard}
			hr.Spec.Values = jsonValues(t, `{"podAnnotations":{"sim.afterhooks.io/delay":"40s"}}`)
			t.Cleanup(func() { cleanupShard(t, ctl, hr) })
			remCreate(t, hr)

			env.Eventually(t, 2*time.Minute, hr.Name+".v1 pending-install (Helm waiting for the pods)", func(ctx context.Context) error {
				if err := ctl.proc.running(); err != nil {
					t.Fatalf("controller: %v", err)
				}
				stored := remStorage(t, ns, hr.Name)
				if len(stored) != 1 || stored[0].Release.Info.Status != "pending-install" {
					return fmt.Errorf("Helm storage %s", remDescribe(stored))
				}
				return nil
			})
			time.Sleep(2 * time.Second) // well inside the readiness wait

			stopped := time.Now()
			if how == "sigterm" {
				if err := ctl.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, usageFile, "990000000") // 99%
			}
			select {
			case err := <-ctl.proc.exited:
				ctl.proc.exited <- err
				if err != nil {
					t.Fatalf("controller exited with %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("controller still running a minute after the %s shutdown", how)
			}
			t.Logf("%s: controller exited cleanly %s after the trigger", how, time.Since(stopped).Round(10*time.Millisecond))

			time.Sleep(300 * time.Millisecond) // requests on the wire land
			stored := remStorage(t, ns, hr.Name)
			if len(stored) != 1 || stored[0].Release.Info.Status != "failed" || stored[0].Secret.Labels["status"] != "failed" {
				t.Errorf("Helm storage %s, want v1 failed: the interrupted install must not stay pending", remDescribe(stored))
			} else {
				t.Logf("storage: v1 %s %q", stored[0].Release.Info.Status, stored[0].Release.Info.Description)
			}
			log := ctl.logText(t)
			if how == "oomwatch" {
				for _, want := range []string{"memory usage reached the threshold", "stopped before running out of memory"} {
					if !strings.Contains(log, want) {
						t.Errorf("controller log lacks %q", want)
					}
				}
			}
			if err := env.Get(context.Background(), hr, ns, hr.Name); err == nil {
				t.Logf("HelmRelease after the shutdown: %s; history %s", remConditions(hr), remSnapshots(hr.Status.History))
			}

			// The next controller takes the failed revision over without help.
			ctl.args = removeFlagPrefix(ctl.args, "--feature-gates=OOMWatch")
			ctl.start(t)
			env.Eventually(t, 3*time.Minute, hr.Name+" Ready after the restart", func(ctx context.Context) error {
				if err := ctl.proc.running(); err != nil {
					t.Fatalf("controller: %v", err)
				}
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
			t.Logf("after the restart: %s; history %s; storage %s", remConditions(hr), remSnapshots(hr.Status.History),
				remDescribe(remStorage(t, ns, hr.Name)))
		})
	}
}

// cleanupShard restarts the shard's controller if needed, deletes hr so the
// controller uninstalls it and drops the finalizer, and stops the controller.
func cleanupShard(t *testing.T, ctl *shardController, hr *v2.HelmRelease) {
	if ctl.proc.running() != nil {
		// The fake cgroup still reads 99%: restart without the watch.
		ctl.args = removeFlagPrefix(ctl.args, "--feature-gates=OOMWatch")
		ctl.start(t)
	}
	_ = env.Client.Delete(context.Background(), hr)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && env.Gone(context.Background(), hr) != nil {
		time.Sleep(framework.PollInterval)
	}
	if err := ctl.proc.stop(); err != nil {
		t.Errorf("stopping the shard controller: %v", err)
	}
}

func removeFlagPrefix(args []string, prefix string) []string {
	var kept []string
	for _, a := range args {
		if !strings.HasPrefix(a, prefix) {
			kept = append(kept, a)
		}
	}
	return kept
}

// writeFile writes content to path, creating its directory.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
