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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	// WithoutCRDs names CRDs (e.g. externalartifacts.source.toolkit.fluxcd.io)
	// left out of SourceCRDs, for tests of a Flux that lacks them.
	WithoutCRDs []string

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
		crds, err := CRDs([]string{SourceCRDDir(binDir)}, s.WithoutCRDs...)
		if err != nil {
			s.err = err
			return
		}
		env.CRDs = crds
	}
	cfg, err := env.Start()
	if err != nil {
		s.err = fmt.Errorf("starting the API server: %w", err)
		return
	}
	s.env, s.cfg = env, cfg
}

// SourceCRDDir is where the tool cache in binDir keeps source-controller's
// CRDs.
func SourceCRDDir(binDir string) string {
	return filepath.Join(binDir, "source-controller-crds")
}

// CRDs reads the CRDs in dirs, every one of which must exist, and leaves out
// those named in without. A name in without that none of the files holds
// is an error, so a renamed CRD cannot make a test pass by accident.
func CRDs(dirs []string, without ...string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	opts := envtest.CRDInstallOptions{Paths: dirs, ErrorIfPathMissing: true}
	if err := envtest.ReadCRDFiles(&opts); err != nil {
		return nil, fmt.Errorf("reading the CRDs in %v: %w", dirs, err)
	}
	skip := map[string]bool{}
	for _, name := range without {
		skip[name] = true
	}
	var kept []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range opts.CRDs {
		if skip[crd.Name] {
			delete(skip, crd.Name)
			continue
		}
		kept = append(kept, crd)
	}
	for name := range skip {
		return nil, fmt.Errorf("no CRD %s in %v to leave out", name, dirs)
	}
	return kept, nil
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
