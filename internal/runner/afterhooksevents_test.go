package runner

import (
	"maps"
	"testing"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// annotatedRecorder keeps each event's type, reason and metadata.
type annotatedRecorder struct {
	events []annotatedEvent
}

type annotatedEvent struct {
	eventType, reason string
	meta              map[string]string
}

func (r *annotatedRecorder) AnnotatedEventf(_, _ runtime.Object, annotations map[string]string, eventtype, reason, _, _ string, _ ...any) {
	r.events = append(r.events, annotatedEvent{eventtype, reason, annotations})
}

// TestAfterHooksEventsCarryRevisionAndToken: the afterHooks progress
// events carry the chart version and values digest under upstream's keys,
// from the release when there is one, else from the attempt.
func TestAfterHooksEventsCarryRevisionAndToken(t *testing.T) {
	obj := &v2.HelmRelease{}
	obj.Status.LastAttemptedRevision = "1.0.0"
	obj.Status.LastAttemptedConfigDigest = "sha256:attempt"
	values := map[string]any{"replicas": 2}
	rel := &releasev1.Release{Name: "app", Version: 3, Config: values,
		Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "app", Version: "1.2.3"}}}
	rec := &annotatedRecorder{}
	o := &afterHooksObserver{obj: obj, release: "app", recorder: rec}
	o.Started("upgrade")
	o.Waiting("upgrade", rel, time.Minute, false)

	revisionKey, tokenKey := "helm.toolkit.fluxcd.io/revision", "helm.toolkit.fluxcd.io/token"
	want := []annotatedEvent{
		{eventv1.EventTypeTrace, AfterHooksStartedReason, map[string]string{revisionKey: "1.0.0", tokenKey: "sha256:attempt"}},
		{eventv1.EventTypeTrace, AfterHooksWaitingReason, map[string]string{revisionKey: "1.2.3",
			tokenKey: chartutil.DigestValues(digest.Canonical, values).String()}},
	}
	if len(rec.events) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(rec.events), len(want), rec.events)
	}
	for i, got := range rec.events {
		if got.eventType != want[i].eventType || got.reason != want[i].reason || !maps.Equal(got.meta, want[i].meta) {
			t.Errorf("event %d: got %+v, want %+v", i, got, want[i])
		}
	}
}
