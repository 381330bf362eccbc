// Package envtestserver gives a test package one kube-apiserver and etcd
// (envtest, no controllers) from the project's tool cache, started on first
// use and shared by the package's tests; its TestMain is Shared.Main. Tests
// that start servers of their own use BinDir, CRDs and Start.
package envtestserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// Shared is a lazily started API server. The zero value is ready to use;
// the package's TestMain is Main, which stops it after the tests.
type Shared struct {
	// SkipShort skips, under -short, the tests that ask for the server.
	SkipShort bool
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

// Main is the TestMain of a package that uses s: it runs the tests, stops
// the server if one of them started it, and exits with the tests' code.
func (s *Shared) Main(m *testing.M) {
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// Config starts the server on first use and returns a copy of its admin
// config. A missing binary or a failed start fails the test.
func (s *Shared) Config(t testing.TB) *rest.Config {
	t.Helper()
	if s.SkipShort && testing.Short() {
		t.Skip("needs an API server")
	}
	s.once.Do(s.start)
	if s.err != nil {
		t.Fatal(s.err)
	}
	return rest.CopyConfig(s.cfg)
}

func (s *Shared) start() {
	binDir, err := BinDir()
	if err != nil {
		s.err = err
		return
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	if s.SourceCRDs {
		if crds, err = CRDs([]string{SourceCRDDir(binDir)}, s.WithoutCRDs...); err != nil {
			s.err = err
			return
		}
	}
	s.env, s.cfg, s.err = Start(binDir, crds)
}

// BinDir is the tool cache's binary directory (test/cluster.ToolBinDir),
// checked to hold etcd and kube-apiserver.
func BinDir() (string, error) {
	binDir, err := cluster.ToolBinDir("")
	if err != nil {
		return "", err
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, bin)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run `make tools` first (%w)", bin, binDir, err)
		}
	}
	return binDir, nil
}

// Start starts an API server from the binaries in binDir serving crds and
// returns it with its admin config; the caller stops it.
func Start(binDir string, crds []*apiextensionsv1.CustomResourceDefinition) (*envtest.Environment, *rest.Config, error) {
	env := &envtest.Environment{BinaryAssetsDirectory: binDir, CRDs: crds}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting the API server: %w", err)
	}
	return env, cfg, nil
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

// CreateNamespaces creates the namespaces named; one that exists already,
// made by an earlier test on the shared server, is kept.
func CreateNamespaces(t testing.TB, cs kubernetes.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}
