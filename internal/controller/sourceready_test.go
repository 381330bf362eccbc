package controller

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSourceNotReady checks when the source of a chart is not ready to be
// used, as upstream decides it: its latest generation is not reconciled, it
// is stalled, or it has no artifact. A Ready=False source with an artifact
// of the current generation is used.
func TestSourceNotReady(t *testing.T) {
	artifact := &meta.Artifact{Revision: "6.7.1", Digest: "sha256:abc"}
	cond := func(typ string, status metav1.ConditionStatus, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R", Message: msg}
	}
	chart := func(gen, observed int64, a *meta.Artifact, conds ...metav1.Condition) *sourcev1.HelmChart {
		c := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: "flux", Name: "apps-web", Generation: gen}}
		c.Status.ObservedGeneration, c.Status.Artifact, c.Status.Conditions = observed, a, conds
		return c
	}
	cases := []struct {
		name       string
		src        sourceObject
		wantMsg    string
		wantFailed bool // the source reports a failure of its own
	}{
		{name: "ready", src: chart(2, 2, artifact, cond(meta.ReadyCondition, metav1.ConditionTrue, ""))},
		{name: "failing but with an artifact of this generation", src: chart(2, 2, artifact, cond(meta.ReadyCondition, metav1.ConditionFalse, "fetch failed"))},
		{name: "generation not reconciled", src: chart(3, 2, artifact),
			wantMsg: "HelmChart 'flux/apps-web' is not ready: latest generation of object has not been reconciled"},
		{name: "generation not reconciled, failing", src: chart(3, 2, artifact, cond(meta.ReadyCondition, metav1.ConditionFalse, "no chart version 9.x")),
			wantMsg: "HelmChart 'flux/apps-web' is not ready: no chart version 9.x", wantFailed: true},
		{name: "stalled", src: chart(2, 2, artifact, cond(meta.StalledCondition, metav1.ConditionTrue, "invalid URL")),
			wantMsg: "HelmChart 'flux/apps-web' is not ready: invalid URL", wantFailed: true},
		{name: "no artifact", src: chart(1, 1, nil),
			wantMsg: "HelmChart 'flux/apps-web' is not ready: does not have an artifact"},
		{name: "never reconciled", src: &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "podinfo", Generation: 1}},
			wantMsg: "OCIRepository 'apps/podinfo' is not ready: latest generation of object has not been reconciled"},
		// An ExternalArtifact has no observedGeneration (its producer
		// writes the status): as upstream, its artifact alone decides.
		{name: "external artifact with an artifact", src: externalArtifact(artifact)},
		{name: "external artifact without one", src: externalArtifact(nil),
			wantMsg: "ExternalArtifact 'apps/chart' is not ready: does not have an artifact"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kind := sourcev1.HelmChartKind
			switch tc.src.(type) {
			case *sourcev1.OCIRepository:
				kind = sourcev1.OCIRepositoryKind
			case *sourcev1.ExternalArtifact:
				kind = sourcev1.ExternalArtifactKind
			}
			if got, failed := sourceNotReady(tc.src, kind); got != tc.wantMsg || failed != tc.wantFailed {
				t.Errorf("sourceNotReady = %q, %t; want %q, %t", got, failed, tc.wantMsg, tc.wantFailed)
			}
		})
	}
}

func externalArtifact(a *meta.Artifact) *sourcev1.ExternalArtifact {
	ea := &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "chart", Generation: 3}}
	ea.Status.Artifact = a
	return ea
}

// TestSourceReadyAllocatesLittle: deciding that a ready source is ready is
// part of every reconcile, including those that find the release in sync;
// it reads the status from the typed object rather than converting the
// whole object to unstructured (40 allocations or more). What is left are
// the copies Flux's conditions helpers make of the conditions they read.
func TestSourceReadyAllocatesLittle(t *testing.T) {
	artifact := &meta.Artifact{Revision: "6.7.1", Digest: "sha256:abc"}
	ready := []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: "R"}}
	chart := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: "flux", Name: "apps-web", Generation: 4}}
	chart.Status.ObservedGeneration, chart.Status.Artifact, chart.Status.Conditions = 4, artifact, ready
	repo := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "podinfo", Generation: 2}}
	repo.Status.ObservedGeneration, repo.Status.Artifact, repo.Status.Conditions = 2, artifact, ready
	for kind, src := range map[string]sourceObject{sourcev1.HelmChartKind: chart, sourcev1.OCIRepositoryKind: repo} {
		if msg, _ := sourceNotReady(src, kind); msg != "" {
			t.Fatalf("%s: sourceNotReady = %q, want ready", kind, msg)
		}
		const conditionCopies = 2
		if n := testing.AllocsPerRun(100, func() { sourceNotReady(src, kind) }); n > conditionCopies {
			t.Errorf("%s: sourceNotReady of a ready source made %v allocations, want at most %d", kind, n, conditionCopies)
		}
	}
}
