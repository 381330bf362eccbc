package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestChartFromAnExternalArtifact: a HelmRelease whose chartRef is an
// ExternalArtifact (ExternalArtifact feature gate on) installs its chart.
// An ExternalArtifact's producer writes its status, with no
// observedGeneration: as upstream, its artifact alone makes it ready, and a
// revision with a digest pins the chart version to it. The artifact here is
// the one source-controller serves for a HelmChart of podinfo.
func TestChartFromAnExternalArtifact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	chart := &sourcev1.HelmChart{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo"},
		Spec: sourcev1.HelmChartSpec{
			Chart: env.Podinfo.Name, Version: env.Podinfo.Version, Interval: metav1.Duration{Duration: time.Hour},
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: repo.Name},
		},
	}
	env.Create(t, chart)
	env.Eventually(t, 2*time.Minute, "HelmChart artifact", func(ctx context.Context) error {
		if err := env.Get(ctx, chart, ns, chart.Name); err != nil {
			return err
		}
		if chart.Status.Artifact == nil {
			return errors.New("no artifact yet")
		}
		return nil
	})

	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo-external"}}
	env.Create(t, ea)
	artifact := chart.Status.Artifact.DeepCopy()
	artifact.Revision = env.Podinfo.Version + "@" + artifact.Digest
	ea.Status.Artifact = artifact
	if err := env.Client.Status().Update(ctx, ea); err != nil {
		t.Fatalf("writing the ExternalArtifact's status as its producer would: %v", err)
	}

	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "external-" + rand.String(8),
		Args: []string{"--feature-gates=ExternalArtifact=true"}})
	framework.EnsureRunning(t, ctl)
	hr := framework.Sharded(env.PodinfoRelease(ns, "external", repo.Name, ""), ctl)
	hr.Spec.Chart = nil
	hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.ExternalArtifactKind, Name: ea.Name}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 2 * time.Minute})

	_, hex, _ := strings.Cut(artifact.Digest, ":")
	latest := hr.Status.History.Latest()
	if want := env.Podinfo.Version + "+" + hex[:12]; latest.ChartVersion != want {
		t.Errorf("chart version %q, want %q: pinned to the artifact's digest", latest.ChartVersion, want)
	}
	if latest.OCIDigest != artifact.Digest {
		t.Errorf("recorded digest %q, want %q", latest.OCIDigest, artifact.Digest)
	}
}
