package plancmd

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Without --chart the chart is the source's artifact, downloaded as the
// controller downloads it; --source-host reaches it through another host
// (a port-forward).
func TestPlanCommandFromTheSourceArtifact(t *testing.T) {
	c := newCluster(t)
	c.createHR(t, "web", nil)
	chrt, err := loader.Load(chartDir(t, "2.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	archive, err := chartutil.Save(chrt, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(data) }))
	defer server.Close()

	src := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: c.ns}}
	src.Spec.URL = "oci://example.com/charts/web"
	src.Spec.Interval = &metav1.Duration{Duration: time.Minute}
	ctx := context.Background()
	if err := c.c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	src.Status.ObservedGeneration = src.Generation
	// The advertised host is not reachable; --source-host is.
	src.Status.Artifact = &meta.Artifact{URL: "http://source-controller.flux-system.svc/web.tgz", Path: "web.tgz",
		Revision: "2.0.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Digest: fmt.Sprintf("sha256:%x", sha256.Sum256(data)), LastUpdateTime: metav1.Now()}
	conditions.MarkTrue(src, meta.ReadyCondition, meta.SucceededReason, "stored artifact")
	if err := c.c.Status().Update(ctx, src); err != nil {
		t.Fatal(err)
	}

	host := strings.TrimPrefix(server.URL, "http://")
	code, out, errOut := run(t, "-n", c.ns, "web", "--kubeconfig", c.kubeconfig, "--source-host", host)
	// The version pinned to the artifact's digest, as the controller pins
	// a chart from an OCIRepository.
	if code != ExitChanges || !strings.Contains(out, "chart: web@2.0.0+0123456789ab\n") || !strings.Contains(out, "next step: install") {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
}
