// Package framework is what every end-to-end test stands on: one local
// cluster with the real source-controller, a chart server, the controller
// under test as a process, and the helpers that wait for releases, read
// events and Helm storage, and publish charts. Tests isolate themselves by
// namespace, or by shard when they run a controller of their own.
package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/testcharts"
)

// Env is the shared test environment.
type Env struct {
	Cluster *cluster.Cluster
	Charts  *chartserver.Server
	Client  client.Client
	// Binary is the controller under test, built once for the run.
	Binary string
	// Controller is the shared controller: it reconciles every
	// HelmRelease without a shard label.
	Controller *Controller
	// Podinfo is the shared podinfo chart, published on Charts.
	Podinfo chartserver.ChartRef
	// WorkDir holds the binary and the shared controller's logs; it goes
	// away with Close.
	WorkDir string

	closers []func() error
}

// Options configure Setup.
type Options struct {
	// Module is the directory of the controller's main package.
	Module string
	// CRDDir holds our CRDs, installed into the cluster.
	CRDDir string
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// Setup builds the controller, starts the cluster, the chart server and the
// shared controller. Close undoes it.
func Setup(ctx context.Context, opts Options) (_ *Env, err error) {
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	e := &Env{}
	defer func() {
		if err != nil {
			_ = e.Close()
		}
	}()
	if e.WorkDir, err = os.MkdirTemp("", "helm-controller-e2e-*"); err != nil {
		return nil, err
	}
	if os.Getenv("TEST_CLUSTER_KEEP_DIR") == "" {
		e.closers = append(e.closers, func() error { return os.RemoveAll(e.WorkDir) })
	}

	e.Binary = filepath.Join(e.WorkDir, "helm-controller")
	start := time.Now()
	build := exec.Command("go", "build", "-o", e.Binary, opts.Module)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the controller: %w", err)
	}
	logf("controller built in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	if e.Cluster, err = cluster.Start(ctx, cluster.Options{
		Name: "e2e", ExtraCRDDirs: []string{opts.CRDDir},
		// Same switch as test/cluster's own tests: keep logs for post-mortems.
		KeepDir: os.Getenv("TEST_CLUSTER_KEEP_DIR") != "",
	}); err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	e.closers = append(e.closers, e.Cluster.Stop)
	logf("cluster ready in %s (%s)", time.Since(start).Round(time.Millisecond), e.Cluster.Dir())

	if e.Client, err = client.New(e.Cluster.RESTConfig(), client.Options{Scheme: NewScheme()}); err != nil {
		return nil, fmt.Errorf("creating the client: %w", err)
	}
	if e.Charts, err = chartserver.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting the chart server: %w", err)
	}
	e.closers = append(e.closers, func() error { e.Charts.Close(); return nil })
	if e.Podinfo, err = e.Charts.AddChart(testcharts.Podinfo); err != nil {
		return nil, fmt.Errorf("publishing podinfo: %w", err)
	}

	e.Controller, err = StartController(ControllerOptions{
		Binary: e.Binary, Kubeconfig: e.Cluster.Kubeconfig(), LogDir: e.WorkDir,
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Close stops what Setup started, newest first.
func (e *Env) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// NewScheme knows every kind the tests read and write.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, v2.AddToScheme, sourcev1.AddToScheme, apiextensionsv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building the test scheme: %v", err))
		}
	}
	return s
}

// StartCluster starts a throwaway cluster beside the shared one, for a test
// that needs a cluster to itself (a remote cluster, another CRD, another
// controller with default ports), stopped when the test ends. It returns
// the cluster and an admin client.
func (e *Env) StartCluster(t testing.TB, opts cluster.Options) (*cluster.Cluster, client.Client) {
	t.Helper()
	start := time.Now()
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting the %s cluster: %v", opts.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stopping the %s cluster: %v", opts.Name, err)
		}
	})
	t.Logf("%s cluster ready in %s at %s", opts.Name, time.Since(start).Round(time.Millisecond), c.APIServerURL())
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

// ToolPath is the tool name built by hack/tools/build.sh (`make tools`),
// with links resolved, so that copies never write through the cache's
// link.
func ToolPath(t testing.TB, name string) string {
	t.Helper()
	dir, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	path, err := filepath.EvalSymlinks(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("%s is missing from the tool cache; run 'make tools': %v", name, err)
	}
	return path
}

// UpstreamBinary is Flux's helm-controller (the version Flux ships), built
// from its Go module by hack/tools/build.sh, for takeover, go-back and
// parity tests.
func UpstreamBinary(t testing.TB) string {
	t.Helper()
	return ToolPath(t, "helm-controller-upstream")
}

// ReserveAddress returns a 127.0.0.1 address for a process to bind and the
// function that frees it once the process is gone. An address taken from a
// listener on port 0 and closed again was seen taken by the time the
// controller bound it (a metrics server failing with "address already in
// use" while tests run in parallel), so ports come from the cluster's
// reservations, which hold a lock and stay out of the ephemeral range.
func ReserveAddress() (string, func(), error) {
	addr, release, err := cluster.ReserveAddress()
	if err != nil {
		return "", nil, fmt.Errorf("reserving a local port: %w", err)
	}
	return addr, release, nil
}
