package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// cliEnv makes the test binary behave as the CLI, so that `up` re-executing
// itself as `serve` works without building the command separately.
const cliEnv = "HACK_CLUSTER_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cli runs the CLI and returns its combined output and exit code.
func cli(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running cli %v: %v", args, err)
	}
	return out.String(), code
}

func TestUpStatusDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	t.Cleanup(func() {
		// Whatever happened, leave nothing running.
		if out, code := cli(t, "down", "--dir", dir); code != 0 {
			t.Errorf("cleanup down: %d %s", code, out)
		}
	})

	began := time.Now()
	out, code := cli(t, "up", "--dir", dir, "--crds", "")
	if code != 0 {
		t.Fatalf("up: exit %d\n%s", code, out)
	}
	t.Logf("up took %s", time.Since(began).Round(time.Millisecond))
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if strings.TrimSpace(out) != kubeconfig {
		t.Errorf("up printed %q, want the kubeconfig path %q", out, kubeconfig)
	}

	out, code = cli(t, "status", "--dir", dir)
	if code != 0 || !strings.Contains(out, "v1.36.3") {
		t.Errorf("status while running: exit %d\n%s", code, out)
	}

	out, code = cli(t, "up", "--dir", dir, "--crds", "")
	if code != 0 || !strings.Contains(out, "already running") {
		t.Errorf("second up: exit %d\n%s", code, out)
	}

	raw, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("pid file content %q: %v", raw, err)
	}

	out, code = cli(t, "down", "--dir", dir)
	if code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("down: exit %d\n%s", code, out)
	}
	if alive(pid) {
		t.Errorf("serve (pid %d) still alive after down", pid)
	}
	if left := processesMentioning(t, dir); len(left) > 0 {
		t.Errorf("processes left after down: %v", left)
	}

	out, code = cli(t, "status", "--dir", dir)
	if code != 1 || !strings.Contains(out, "no cluster running") {
		t.Errorf("status after down: exit %d\n%s", code, out)
	}
	// The logs stay for a post-mortem.
	if _, err := os.Stat(filepath.Join(dir, "logs", "kube-apiserver.log")); err != nil {
		t.Errorf("logs gone after down: %v", err)
	}
}

// processesMentioning lists running processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	found, err := cluster.ProcessesMentioning(s)
	if err != nil {
		t.Skipf("cannot inspect processes: %v", err)
	}
	return found
}
