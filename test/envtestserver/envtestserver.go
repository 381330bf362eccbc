// Package envtestserver gives a test package one kube-apiserver and etcd
// (envtest, no controllers) from the project's tool cache, started on first
// use and shared by the package's tests.
package envtestserver

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// Shared is a lazily started API server. The zero value is ready to use;
// call Stop from TestMain after m.Run.
type Shared struct {
	// SourceCRDs installs source-controller's CRDs (HelmChart,
	// HelmRepository, OCIRepository...) from the tool cache. Set it before
	// the first Config.
	SourceCRDs bool

	once sync.Once
	env  *envtest.Environment
	cfg  *rest.Config
	err  error
}

// Config starts the server on first use and returns a copy of its admin
// config. A missing binary or a failed start fails the test.
func (s *Shared) Config(t testing.TB) *rest.Config {
	t.Helper()
	s.once.Do(s.start)
	if s.err != nil {
		t.Fatal(s.err)
	}
	return rest.CopyConfig(s.cfg)
}

func (s *Shared) start() {
	binDir, err := cluster.ToolBinDir("")
	if err != nil {
		s.err = err
		return
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			s.err = fmt.Errorf("%s not found in %s: run `make tools` first (%v)", bin, binDir, err)
			return
		}
	}
	env := &envtest.Environment{BinaryAssetsDirectory: binDir}
	if s.SourceCRDs {
		env.CRDDirectoryPaths = []string{filepath.Join(binDir, "source-controller-crds")}
		env.ErrorIfCRDPathMissing = true
	}
	cfg, err := env.Start()
	if err != nil {
		s.err = fmt.Errorf("starting the API server: %w", err)
		return
	}
	s.env, s.cfg = env, cfg
}

// Stop stops the server if it was started.
func (s *Shared) Stop() {
	if s.env == nil {
		return
	}
	if err := s.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
	}
}
