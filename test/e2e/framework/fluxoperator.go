package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// FluxInstanceGVK is the Flux Operator's FluxInstance kind. The tests
// handle it unstructured: the operator's API module is a tool here, not a
// dependency of this module.
var FluxInstanceGVK = schema.GroupVersionKind{Group: "fluxcd.controlplane.io", Version: "v1", Kind: "FluxInstance"}

// FluxOperatorTools are the Flux Operator's binary, its CRDs and the Flux
// distribution manifests it carries, as `hack/tools/build.sh
// flux-operator` leaves them in the tool cache.
type FluxOperatorTools struct {
	Binary string
	// CRDDir holds the operator's CRDs (FluxInstance, FluxReport, ...).
	CRDDir string
	// DataDir is the operator's --storage-path: flux/<version>/ and
	// flux-images/, the manifests it renders Flux from, offline.
	DataDir string
}

// FluxOperator skips t when the Flux Operator is not in the tool cache:
// it is built only on request, being a heavy compile that only one test
// needs.
func FluxOperator(t testing.TB) FluxOperatorTools {
	t.Helper()
	dir, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	var tools FluxOperatorTools
	for _, p := range []struct {
		name string
		into *string
	}{{"flux-operator", &tools.Binary}, {"flux-operator-crds", &tools.CRDDir}, {"flux-operator-data", &tools.DataDir}} {
		path, err := filepath.EvalSymlinks(filepath.Join(dir, p.name))
		if err != nil {
			t.Skipf("the Flux Operator is not in the tool cache (%s); build it with 'make tools-flux-operator'", p.name)
		}
		*p.into = path
	}
	return tools
}

// StartFluxOperator runs the operator as a local process against the
// cluster of kubeconfig, managing the FluxInstance flux-system/flux, and
// stops it when t ends. Its log is logPath. The web UI is off (the module
// carries no UI build) and the ports are free local ones.
func StartFluxOperator(t testing.TB, tools FluxOperatorTools, kubeconfig, logPath string) {
	t.Helper()
	metrics, releaseMetrics, err := ReserveAddress()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(releaseMetrics)
	health, releaseHealth, err := ReserveAddress()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(releaseHealth)
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tools.Binary,
		"--storage-path="+tools.DataDir,
		"--web-server-port=0",
		"--metrics-addr="+metrics,
		"--health-addr="+health,
		"--enable-leader-election=false",
		"--log-level=debug",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Out of a pod: KUBERNETES_SERVICE_HOST unset keeps the operator's
	// in-container checks (its image's /etc/os-release) off.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "RUNTIME_NAMESPACE="+LeaseNamespace, "KUBERNETES_SERVICE_HOST=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting the Flux Operator: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			var b strings.Builder
			(&process{logPath: logPath}).dumpLog(&b, 60)
			t.Log(b.String())
		}
	})
}

// FluxInstanceApplied returns nil once the FluxInstance ns/name is Ready
// for its current generation, and returns it as read.
func FluxInstanceApplied(ctx context.Context, c client.Client, ns, name string) (*unstructured.Unstructured, error) {
	fi := &unstructured.Unstructured{}
	fi.SetGroupVersionKind(FluxInstanceGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, fi); err != nil {
		return nil, err
	}
	// The operator writes no status.observedGeneration; its conditions
	// carry the generation they are about.
	conds, _, _ := unstructured.NestedSlice(fi.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		observed, _ := m["observedGeneration"].(int64)
		if m["status"] == "True" && observed == fi.GetGeneration() {
			return fi, nil
		}
		return fi, fmt.Errorf("FluxInstance %s/%s generation %d (observed %d): Ready=%v %v: %v",
			ns, name, fi.GetGeneration(), observed, m["status"], m["reason"], m["message"])
	}
	return fi, fmt.Errorf("FluxInstance %s/%s has no Ready condition yet", ns, name)
}
