package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Suite is a test package whose tests share one Env; its TestMain is
// Suite.Main. The package sits two directories below the module root.
type Suite struct {
	// Name prefixes every line the suite logs: "e2e", "reliability".
	Name string
	// Env receives the environment before the tests run.
	Env **Env
	// Ran, when set, runs after the tests while the shared controller still
	// runs, with how long the tests took.
	Ran func(took time.Duration)
	// Stopped, when set, runs once the shared controller has stopped, with
	// the exit code so far; it returns the code to exit with. Its error
	// fails the run.
	Stopped func(code int) (int, error)
}

// Main sets the environment up, runs the tests, stops the shared
// controller, tears the environment down and exits: with the tests' code,
// or 1 when anything around them failed.
func (s Suite) Main(m *testing.M) {
	os.Exit(s.run(m))
}

func (s Suite) run(m *testing.M) int {
	// The tests' own clients (and the plan command they run in process)
	// log through controller-runtime; without a logger it prints a stack
	// trace into the test output, which reads like a failure.
	ctrllog.SetLogger(logr.Discard())
	env, err := Setup(context.Background(), Options{
		Module: filepath.Join("..", ".."),
		CRDDir: filepath.Join("..", "..", "config", "crd", "bases"),
		Log:    s.logf,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s setup failed: %v\n", s.Name, err)
		return 1
	}
	defer func() {
		if err := env.Close(); err != nil {
			s.logf("tearing down: %v", err)
		}
	}()
	*s.Env = env

	start := time.Now()
	code := m.Run()
	if s.Ran != nil {
		s.Ran(time.Since(start))
	}
	if err := env.Controller.Stop(); err != nil {
		s.logf("stopping the shared controller: %v", err)
		code = 1
	}
	if s.Stopped == nil {
		return code
	}
	code, err = s.Stopped(code)
	if err != nil {
		s.logf("%v", err)
		return 1
	}
	return code
}

func (s Suite) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, s.Name+": "+format+"\n", args...)
}
