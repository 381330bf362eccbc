// Package reliability is the suite behind `make reliability`: faults at
// every phase of a release's life, load, and bad input, each checked
// against the invariants a Flux user relies on. It prints one table and,
// with RELIABILITY_REPORT=<file>, writes it into that file.
//
// RELIABILITY=full runs the whole suite; the default is the short
// version that `make test` runs within the CI time limit.
package reliability

import (
	"fmt"
	"os"
	"testing"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// env is the cluster, chart server and shared controller of the suite.
var env *framework.Env

// full is true for `make reliability`, false for the short suite.
var full = os.Getenv("RELIABILITY") == "full"

// report collects the rows of the table.
var report = &table{}

func TestMain(m *testing.M) {
	framework.Suite{Name: "reliability", Env: &env, Stopped: printReport}.Main(m)
}

// printReport prints the table and, with RELIABILITY_REPORT, writes it into
// that file.
func printReport(code int) (int, error) {
	text := report.markdown(full)
	fmt.Fprintln(os.Stderr, text)
	// A long log is cut in the middle; the failed rows come again last so
	// that they survive that.
	if failed := report.failedRows(); failed != "" {
		fmt.Fprintln(os.Stderr, failed)
	}
	if path := os.Getenv("RELIABILITY_REPORT"); path != "" {
		if err := writeSection(path, text); err != nil {
			return 1, err
		}
	}
	return code, nil
}
