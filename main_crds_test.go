package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
)

const externalArtifactsCRD = "externalartifacts.source.toolkit.fluxcd.io"

// TestReconcilesWithoutExternalArtifactCRD: on a Flux whose
// source-controller has no ExternalArtifact API, the controller with its
// default feature gates starts and installs a HelmRelease, as upstream's
// does. With the ExternalArtifact gate on by default, its watch could not
// sync and the manager exited.
func TestReconcilesWithoutExternalArtifactCRD(t *testing.T) {
	binary := controllerBinary(t)
	kubeconfig, cfg := startAPIServerWithConfig(t, externalArtifactsCRD)
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	hr := releaseOfServedChart(ctx, t, c, "apps")
	ctl, output := startController(t, binary, kubeconfig)

	var got v2.HelmRelease
	waitFor(t, 2*time.Minute, func() bool {
		select {
		case err := <-ctl:
			t.Fatalf("controller exited (%v):\n%s", err, output.String())
		default:
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(hr), &got); err != nil {
			return false
		}
		return conditions.IsReady(&got) && got.Status.ObservedGeneration == got.Generation
	}, "the HelmRelease did not become Ready", output)
	if reason := conditions.GetReason(&got, meta.ReadyCondition); reason != helmv2.InstallSucceededReason {
		t.Errorf("Ready reason %s, want %s", reason, helmv2.InstallSucceededReason)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "tested-settings"}, &cm); err != nil {
		t.Errorf("the chart's ConfigMap was not installed: %v", err)
	}
	select {
	case err := <-ctl:
		t.Fatalf("controller exited (%v):\n%s", err, output.String())
	default:
	}
}

// TestMissingCRDIsNamedAtStartup: a kind the controller would watch but the
// API server does not serve stops the start at once, with an error naming
// its CRD and what to do, instead of a cache sync timeout minutes later.
func TestMissingCRDIsNamedAtStartup(t *testing.T) {
	tests := []struct {
		name    string
		without []string
		args    []string
		want    []string
	}{
		{name: "ExternalArtifact gate on without its CRD", without: []string{externalArtifactsCRD},
			args: []string{"--feature-gates=ExternalArtifact=true"},
			want: []string{"the API server does not serve externalartifacts.source.toolkit.fluxcd.io (source.toolkit.fluxcd.io/v1): " +
				"install Flux's source-controller CRDs or turn off the ExternalArtifact feature gate"}},
		{name: "source and HelmRelease CRDs missing",
			without: []string{externalArtifactsCRD, "ocirepositories.source.toolkit.fluxcd.io", "helmreleases.helm.toolkit.fluxcd.io"},
			want: []string{
				"the API server does not serve helmreleases.helm.toolkit.fluxcd.io (helm.toolkit.fluxcd.io/v2): apply this controller's HelmRelease CRD",
				"the API server does not serve ocirepositories.source.toolkit.fluxcd.io (source.toolkit.fluxcd.io/v1): install Flux's source-controller CRDs",
			}},
	}
	binary := controllerBinary(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kubeconfig := startAPIServer(t, tt.without...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"--kubeconfig=" + kubeconfig, "--metrics-addr=127.0.0.1:" + freePort(t),
				"--health-addr=127.0.0.1:" + freePort(t)}, tt.args...)
			out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("still running after 30s, want a start-up error:\n%s", out)
			}
			if err == nil {
				t.Fatalf("exit code 0, want a start-up error:\n%s", out)
			}
			for _, want := range tt.want {
				if !strings.Contains(string(out), want) {
					t.Errorf("output does not name the missing CRD: %q\n%s", want, out)
				}
			}
		})
	}
}

// startController runs the controller binary with its default feature
// gates against kubeconfig until the test ends; the channel gets its exit.
func startController(t *testing.T, binary, kubeconfig string) (<-chan error, *syncBuffer) {
	t.Helper()
	output := &syncBuffer{}
	cmd := exec.Command(binary, "--kubeconfig="+kubeconfig, "--log-encoding=console",
		"--metrics-addr=127.0.0.1:"+freePort(t), "--health-addr=127.0.0.1:"+freePort(t))
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return exited, output
}

// releaseOfServedChart serves the e2e-tests chart (a ConfigMap) from a
// chart server of the test, publishes it as the artifact of a HelmChart
// in ns, as source-controller would, and creates a HelmRelease of it.
// Nothing else runs on this API server: no source-controller, no nodes.
func releaseOfServedChart(ctx context.Context, t *testing.T, c client.Client, ns string) *v2.HelmRelease {
	t.Helper()
	srv, err := chartserver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	chart, err := srv.AddChart(filepath.Join("test", "e2e", "framework", "charts", "e2e-tests"))
	if err != nil {
		t.Fatal(err)
	}

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	hc := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e2e-tests"}}
	hc.Spec = sourcev1.HelmChartSpec{Chart: chart.Name, Version: chart.Version, Interval: metav1.Duration{Duration: time.Hour},
		SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	hc.Status.ObservedGeneration = hc.Generation
	hc.Status.Artifact = &meta.Artifact{URL: chart.URL, Path: fmt.Sprintf("helmchart/%s/e2e-tests/%s-%s.tgz", ns, chart.Name, chart.Version),
		Revision: chart.Version, Digest: chart.Digest, LastUpdateTime: metav1.Now()}
	conditions.MarkTrue(hc, meta.ReadyCondition, meta.SucceededReason, "served by the test")
	if err := c.Status().Update(ctx, hc); err != nil {
		t.Fatal(err)
	}

	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tested"}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Hour}
	hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.HelmChartKind, Name: hc.Name}
	if err := c.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	return hr
}
