// Package e2e runs the controller binary against a throwaway local cluster
// with the real source-controller, serving charts from 127.0.0.1. The
// environment and the helpers the tests share are in package framework.
package e2e

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// env is shared by every test in the package: one cluster, one chart server
// and one controller process. Tests isolate themselves by namespace, or by
// shard when they run a controller of their own.
var env *framework.Env

func TestMain(m *testing.M) {
	framework.Suite{Name: "e2e", Env: &env, Ran: logUsage, Stopped: keepControllerLog}.Main(m)
}

// logUsage reports what the shared controller cost over the run.
func logUsage(took time.Duration) {
	if cpu, peak, err := env.Controller.ResourceUsage(); err == nil {
		fmt.Fprintf(os.Stderr, "e2e: tests ran %s; controller used %s CPU, peak RSS %d MiB\n",
			took.Round(time.Second), cpu.Round(10*time.Millisecond), peak/1024)
	}
}

// keepControllerLog shows the end of the shared controller's log after a
// failure. The work directory goes away with the run; E2E_CONTROLLER_LOG
// keeps the whole log for a post-mortem.
func keepControllerLog(code int) (int, error) {
	if code != 0 {
		env.Controller.DumpLogs(os.Stderr, 80)
	}
	if keep := os.Getenv("E2E_CONTROLLER_LOG"); keep != "" {
		if log, err := env.Controller.Log(); err == nil {
			_ = os.WriteFile(keep, []byte(log), 0o644)
		}
	}
	return code, nil
}
