// Package e2e runs the controller binary against a throwaway local cluster
// with the real source-controller, serving charts from 127.0.0.1.
package e2e

import (
	"context"
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
)

// env is shared by every test in the package: one cluster, one chart server
// and one controller process. Tests isolate themselves by namespace.
var env struct {
	cluster *cluster.Cluster
	charts  *chartserver.Server
	// binary is the controller binary, for tests that run their own.
	binary     string
	client     client.Client
	controller *controllerProcess
	podinfo    chartserver.ChartRef
}

// sharedCharts holds the real charts shipped beside the repository.
var sharedCharts = filepath.Join("..", "..", "..", "shared", "charts")

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e setup failed: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	workDir, err := os.MkdirTemp("", "helm-controller-e2e-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(workDir)

	binary := filepath.Join(workDir, "helm-controller")
	env.binary = binary
	start := time.Now()
	build := exec.Command("go", "build", "-o", binary, "../..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building the controller: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: controller built in %s\n", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		Name:         "e2e",
		ExtraCRDDirs: []string{filepath.Join("..", "..", "config", "crd", "bases")},
	})
	if err != nil {
		return 0, fmt.Errorf("starting the cluster: %w", err)
	}
	defer c.Stop()
	env.cluster = c
	fmt.Fprintf(os.Stderr, "e2e: cluster ready in %s (%s)\n", time.Since(start).Round(time.Millisecond), c.Dir())

	env.client, err = client.New(c.RESTConfig(), client.Options{Scheme: newScheme()})
	if err != nil {
		return 0, fmt.Errorf("creating the client: %w", err)
	}

	env.charts, err = chartserver.Start(ctx)
	if err != nil {
		return 0, fmt.Errorf("starting the chart server: %w", err)
	}
	defer env.charts.Close()
	env.podinfo, err = env.charts.AddChart(filepath.Join(sharedCharts, "podinfo"))
	if err != nil {
		return 0, fmt.Errorf("publishing podinfo: %w", err)
	}

	env.controller, err = startController(binary, c.Kubeconfig(), filepath.Join(workDir, "controller.log"))
	if err != nil {
		return 0, err
	}
	start = time.Now()
	code := m.Run()
	if cpu, peak, err := env.controller.resourceUsage(); err == nil {
		fmt.Fprintf(os.Stderr, "e2e: tests ran %s; controller used %s CPU, peak RSS %d MiB\n",
			time.Since(start).Round(time.Second), cpu.Round(10*time.Millisecond), peak/1024)
	}
	if err := env.controller.stop(); err != nil {
		return code, err
	}
	if code != 0 {
		env.controller.dumpLog(os.Stderr, 80)
	}
	// The work directory goes away with the run; E2E_CONTROLLER_LOG keeps
	// the whole log of the shared controller for a post-mortem.
	if keep := os.Getenv("E2E_CONTROLLER_LOG"); keep != "" {
		if data, err := os.ReadFile(env.controller.logPath); err == nil {
			_ = os.WriteFile(keep, data, 0o644)
		}
	}
	return code, nil
}

func newScheme() *runtime.Scheme {
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
