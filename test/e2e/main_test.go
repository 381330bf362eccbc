// Package e2e runs the controller binary against a throwaway local cluster
// with the real source-controller, serving charts from 127.0.0.1. The
// environment and the helpers the tests share are in package framework.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// env is shared by every test in the package: one cluster, one chart server
// and one controller process. Tests isolate themselves by namespace, or by
// shard when they run a controller of their own.
var env *framework.Env

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e setup failed: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	env, err = framework.Setup(context.Background(), framework.Options{
		Module: filepath.Join("..", ".."),
		CRDDir: filepath.Join("..", "..", "config", "crd", "bases"),
		Log:    func(format string, args ...any) { fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...) },
	})
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := env.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: tearing down: %v\n", err)
		}
	}()

	start := time.Now()
	code := m.Run()
	if cpu, peak, err := env.Controller.ResourceUsage(); err == nil {
		fmt.Fprintf(os.Stderr, "e2e: tests ran %s; controller used %s CPU, peak RSS %d MiB\n",
			time.Since(start).Round(time.Second), cpu.Round(10*time.Millisecond), peak/1024)
	}
	if err := env.Controller.Stop(); err != nil {
		return code, err
	}
	if code != 0 {
		env.Controller.DumpLogs(os.Stderr, 80)
	}
	// The work directory goes away with the run; E2E_CONTROLLER_LOG keeps
	// the whole log of the shared controller for a post-mortem.
	if keep := os.Getenv("E2E_CONTROLLER_LOG"); keep != "" {
		if log, err := env.Controller.Log(); err == nil {
			_ = os.WriteFile(keep, []byte(log), 0o644)
		}
	}
	return code, nil
}
