// Package reliability is the suite behind `make reliability`: faults at
// every phase of a release's life, load, and bad input, each checked
// against the invariants a Flux user relies on. It prints one table and,
// with RELIABILITY_REPORT=<file>, writes it into that file.
//
// RELIABILITY=full runs the whole suite; the default is the short
// version that `make test` runs within the CI time limit.
package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reliability setup failed: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	env, err = framework.Setup(context.Background(), framework.Options{
		Module: filepath.Join("..", ".."),
		CRDDir: filepath.Join("..", "..", "config", "crd", "bases"),
		Log:    func(format string, args ...any) { fmt.Fprintf(os.Stderr, "reliability: "+format+"\n", args...) },
	})
	if err != nil {
		return 0, err
	}
	defer env.Close()
	code := m.Run()
	if err := env.Controller.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the shared controller: %v\n", err)
		code = 1
	}
	text := report.markdown(full)
	fmt.Fprintln(os.Stderr, text)
	if path := os.Getenv("RELIABILITY_REPORT"); path != "" {
		if err := writeSection(path, text); err != nil {
			return 1, err
		}
	}
	return code, nil
}
