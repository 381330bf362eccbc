package plancmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/runner"
)

type dirChart struct{ dir string }

func (d dirChart) Metadata() *chartv2.Metadata {
	c, _ := d.Load()
	return c.Metadata
}

func (d dirChart) Load() (*chartv2.Chart, error) { return loader.Load(d.dir) }

// installWeb installs release web of chart with values a=1 through the
// controller's machine, as a reconcile of obj would, and leaves obj's
// status as that reconcile wrote it (not yet sent to the cluster).
func installWeb(t *testing.T, c *cluster, obj *v2.HelmRelease, chart string) {
	t.Helper()
	factory, err := action.NewConfigFactoryFromRESTConfig(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	helm, err := runner.New(factory, nil, obj, runner.Settings{DefaultHookOrder: v2.BeforeHooks})
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{"a": "1"}
	req := &reconcile.Request{Object: obj, ReleaseName: "web", Chart: dirChart{chart}, Values: values,
		ConfigDigest: chartutil.DigestValues(digest.Canonical, values).String()}
	if err := (&reconcile.Machine{Helm: helm}).Run(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// After a reconcile the plan of the same chart and values is no change
// (exit 0); the same HelmRelease in a file with other values is an
// upgrade (exit 1) naming the changed key, under the controller's default
// hook order given on the command line.
func TestPlanCommandNoChangeThenFile(t *testing.T) {
	c := newCluster(t)
	obj := c.createHR(t, "web", nil)
	chart := chartDir(t, "1.0.0")
	installWeb(t, c, obj, chart)
	if err := c.c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run(t, "-n", c.ns, "web", "--chart", chart, "--kubeconfig", c.kubeconfig)
	if code != ExitNoChange || !strings.Contains(out, "next step: none") {
		t.Fatalf("exit %d, stderr %q, want %d:\n%s", code, errOut, ExitNoChange, out)
	}

	file := filepath.Join(t.TempDir(), "hr.yaml")
	hr := "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\nspec:\n  interval: 1m\n  chartRef:\n    kind: OCIRepository\n    name: charts\n  values:\n    a: \"2\"\n"
	if err := os.WriteFile(file, []byte(hr), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "-n", c.ns, "--file", file, "--chart", chart, "--kubeconfig", c.kubeconfig, "--default-wait-strategy", "afterHooks")
	if code != ExitChanges {
		t.Fatalf("exit %d, stderr %q, want %d:\n%s", code, errOut, ExitChanges, out)
	}
	for _, want := range []string{"next step: upgrade", "values changed: a", "~ ConfigMap/web (data.a)",
		"3. run 0 post-upgrade hooks\n    4. wait for readiness (afterHooks"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("\n%s", out)
}
