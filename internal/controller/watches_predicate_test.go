package controller

import (
	"context"
	"slices"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestArtifactChanged: which updates of a source bring its HelmReleases
// back at once: a new artifact (revision or digest), and, as upstream, the
// source turning Ready with the artifact it had (a failing fetch that
// recovered); not a status change that leaves both alone.
func TestArtifactChanged(t *testing.T) {
	chart := func(revision, digest string, ready metav1.ConditionStatus) *sourcev1.HelmChart {
		c := &sourcev1.HelmChart{}
		if revision != "" {
			c.Status.Artifact = &meta.Artifact{Revision: revision, Digest: digest}
		}
		if ready != "" {
			c.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: ready, Reason: "R"}}
		}
		return c
	}
	cases := []struct {
		name     string
		old, new *sourcev1.HelmChart
		want     bool
	}{
		{name: "first artifact", old: chart("", "", ""), new: chart("1.0.0", "sha256:a", metav1.ConditionTrue), want: true},
		{name: "new revision", old: chart("1.0.0", "sha256:a", metav1.ConditionTrue), new: chart("1.1.0", "sha256:b", metav1.ConditionTrue), want: true},
		{name: "new digest", old: chart("1.0.0", "sha256:a", metav1.ConditionTrue), new: chart("1.0.0", "sha256:b", metav1.ConditionTrue), want: true},
		{name: "turned Ready with the same artifact", old: chart("1.0.0", "sha256:a", metav1.ConditionFalse), new: chart("1.0.0", "sha256:a", metav1.ConditionTrue), want: true},
		{name: "still Ready, same artifact", old: chart("1.0.0", "sha256:a", metav1.ConditionTrue), new: chart("1.0.0", "sha256:a", metav1.ConditionTrue)},
		{name: "turned not Ready", old: chart("1.0.0", "sha256:a", metav1.ConditionTrue), new: chart("1.0.0", "sha256:a", metav1.ConditionFalse)},
		{name: "no artifact", old: chart("", "", metav1.ConditionFalse), new: chart("", "", metav1.ConditionTrue)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := (artifactChanged{}).Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSourceEventsSkipReleasesThatAttemptedTheArtifact: as upstream, an
// event of a source whose artifact a Ready (or reconciling) release has
// already attempted does not bring that release back; any other release
// of the source comes back.
func TestSourceEventsSkipReleasesThatAttemptedTheArtifact(t *testing.T) {
	release := func(name, kind, srcName string, ready metav1.ConditionStatus, reconciling bool, revision, digest string) *v2.HelmRelease {
		hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}}
		hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: kind, Name: srcName}
		hr.Status.LastAttemptedRevision = revision
		hr.Status.LastAttemptedRevisionDigest = digest
		if ready != "" {
			hr.Status.Conditions = append(hr.Status.Conditions, metav1.Condition{Type: meta.ReadyCondition, Status: ready, Reason: "R"})
		}
		if reconciling {
			hr.Status.Conditions = append(hr.Status.Conditions, metav1.Condition{Type: meta.ReconcilingCondition, Status: metav1.ConditionTrue, Reason: "R"})
		}
		return hr
	}
	const digest = "sha256:0123456789abcdef0123456789abcdef"
	tests := []struct {
		name     string
		kind     string
		source   client.Object
		releases []*v2.HelmRelease
		want     []string
	}{
		{
			name:   "HelmChart: by chart version",
			kind:   sourcev1.HelmChartKind,
			source: &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Status: sourcev1.HelmChartStatus{Artifact: &meta.Artifact{Revision: "1.2.0", Digest: digest}}},
			releases: []*v2.HelmRelease{
				release("ready-same", sourcev1.HelmChartKind, "web", metav1.ConditionTrue, false, "1.2.0", ""),
				release("reconciling-same", sourcev1.HelmChartKind, "web", metav1.ConditionUnknown, true, "1.2.0", ""),
				release("ready-older", sourcev1.HelmChartKind, "web", metav1.ConditionTrue, false, "1.1.0", ""),
				release("failed-same", sourcev1.HelmChartKind, "web", metav1.ConditionFalse, false, "1.2.0", ""),
				release("never-attempted", sourcev1.HelmChartKind, "web", "", false, "", ""),
				release("other-source", sourcev1.HelmChartKind, "api", metav1.ConditionFalse, false, "", ""),
			},
			want: []string{"failed-same", "never-attempted", "ready-older"},
		},
		{
			name:   "OCIRepository: by digest, whatever the tag",
			kind:   sourcev1.OCIRepositoryKind,
			source: &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Status: sourcev1.OCIRepositoryStatus{Artifact: &meta.Artifact{Revision: "1.2.0@" + digest}}},
			releases: []*v2.HelmRelease{
				release("ready-same", sourcev1.OCIRepositoryKind, "web", metav1.ConditionTrue, false, "1.2.0+0123456789ab", digest),
				release("ready-other-digest", sourcev1.OCIRepositoryKind, "web", metav1.ConditionTrue, false, "1.2.0+fedcba987654", "sha256:fedcba9876543210"),
				release("ready-no-digest", sourcev1.OCIRepositoryKind, "web", metav1.ConditionTrue, false, "1.2.0", ""),
			},
			want: []string{"ready-no-digest", "ready-other-digest"},
		},
		{
			name:   "OCIRepository with a tag that is no version: the whole revision recorded",
			kind:   sourcev1.OCIRepositoryKind,
			source: &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Status: sourcev1.OCIRepositoryStatus{Artifact: &meta.Artifact{Revision: "latest@" + digest}}},
			releases: []*v2.HelmRelease{
				release("ready-same", sourcev1.OCIRepositoryKind, "web", metav1.ConditionTrue, false, "1.2.0+0123456789ab", "latest@"+digest),
			},
		},
		{
			name:   "ExternalArtifact: by revision or digest",
			kind:   sourcev1.ExternalArtifactKind,
			source: &sourcev1.ExternalArtifact{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}, Status: sourcev1.ExternalArtifactStatus{Artifact: &meta.Artifact{Revision: "3.0.0"}}},
			releases: []*v2.HelmRelease{
				release("ready-same", sourcev1.ExternalArtifactKind, "web", metav1.ConditionTrue, false, "3.0.0", ""),
				release("ready-older", sourcev1.ExternalArtifactKind, "web", metav1.ConditionTrue, false, "2.0.0", ""),
			},
			want: []string{"ready-older"},
		},
		{
			name:     "source without an artifact",
			kind:     sourcev1.HelmChartKind,
			source:   &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}},
			releases: []*v2.HelmRelease{release("never-attempted", sourcev1.HelmChartKind, "web", "", false, "", "")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := make([]client.Object, 0, len(tc.releases))
			for _, hr := range tc.releases {
				objs = append(objs, hr)
			}
			c := fake.NewClientBuilder().WithScheme(newRevisionScheme(t)).WithObjects(objs...).
				WithIndex(&v2.HelmRelease{}, helmv2.SourceIndexKey, indexBySource).Build()
			r := &HelmReleaseReconciler{Client: c}
			var got []string
			for _, req := range r.requestsForSource(tc.kind)(context.Background(), tc.source) {
				got = append(got, req.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("requests for %v, want %v", got, tc.want)
			}
		})
	}
}
