package controller

import (
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
