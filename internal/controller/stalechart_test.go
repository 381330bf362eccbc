package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestChartTemplateReadAfterWrite: a HelmRelease whose chart template
// changed applies the new HelmChart spec and then reads the HelmChart. The
// cache may not have seen the apply yet and still shows the old spec, fully
// reconciled, with the old chart's artifact: taken for the new spec's, it
// upgraded the release with the old chart and the new values, an extra
// revision, before the new chart's artifact came and upgraded it again
// (found by test/reliability TestFaultsArtifactServer, which changes chart
// version and values at once). Until the HelmRelease's generation is
// reconciled, the HelmChart is read from the API server, where the new
// spec is not reconciled yet; afterwards the cache is read, as upstream
// does.
func TestChartTemplateReadAfterWrite(t *testing.T) {
	ctx := context.Background()
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web", Generation: 2}}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo", Version: "2.0.0",
		SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	hr.Status.ObservedGeneration = 1
	hr.Status.HelmChart = "apps/apps-web"

	chart := func(version string, generation, observed int64, revision string) *sourcev1.HelmChart {
		c := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "apps-web", Generation: generation},
			Spec: sourcev1.HelmChartSpec{Chart: "podinfo", Version: version}}
		c.Status.ObservedGeneration = observed
		c.Status.Artifact = &meta.Artifact{Revision: revision, Digest: "sha256:aaa"}
		return c
	}
	build := func(c *sourcev1.HelmChart) client.Client {
		return fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(c).
			WithStatusSubresource(&sourcev1.HelmChart{}).Build()
	}
	// The cache: the old spec, reconciled, with the old chart's artifact.
	cache := build(chart("1.0.0", 1, 1, "1.0.0"))
	// The API server: the new spec, not reconciled yet.
	api := build(chart("2.0.0", 2, 1, "1.0.0"))
	r := &HelmReleaseReconciler{Client: cache, APIReader: api}

	artifact, err := r.sourceArtifact(ctx, hr)
	var notReady *sourceNotReadyError
	if !errors.As(err, &notReady) {
		t.Fatalf("sourceArtifact = %v, %v; want the HelmChart not ready: its new spec is not reconciled yet", artifact, err)
	}

	// Once the generation is reconciled, the cache is read.
	hr.Status.ObservedGeneration = 2
	r.APIReader = nil
	if artifact, err := r.sourceArtifact(ctx, hr); err != nil || artifact.Revision != "1.0.0" {
		t.Errorf("sourceArtifact = %v, %v; want the cached artifact", artifact, err)
	}
}
