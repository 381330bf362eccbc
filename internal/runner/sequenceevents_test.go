package runner

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/sequencing"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// shopPlan is db → migrate → app, with a leaf tail and a warning.
var shopPlan = &sequencing.Plan{
	Batches: []sequencing.Batch{
		{Name: "db", Resources: make([]sequencing.ObjectID, 2), Wait: true},
		{Name: "migrate", Resources: make([]sequencing.ObjectID, 1), Needs: []int{0}, Wait: true},
		{Name: "app", Resources: make([]sequencing.ObjectID, 1), Needs: []int{1}},
		{Name: "unsequenced", Resources: make([]sequencing.ObjectID, 3), After: []int{1}},
	},
	Warnings: []string{`chart shop: resource group "x" neither depends on another group nor is depended on; applied unsequenced`},
}

func TestSequenceStatusShowsThePlan(t *testing.T) {
	tests := []struct {
		name     string
		deleting bool
		want     []v2.SequenceBatch
	}{
		{name: "apply: each batch after those it needs", want: []v2.SequenceBatch{
			{Name: "db", Resources: 2, Phase: "pending"},
			{Name: "migrate", Needs: []int{1}, Resources: 1, Phase: "pending"},
			{Name: "app", Needs: []int{2}, Resources: 1, Phase: "pending"},
			{Name: "unsequenced", Needs: []int{2}, Resources: 3, Phase: "pending"},
		}},
		{name: "uninstall: each batch after those that needed it", deleting: true, want: []v2.SequenceBatch{
			{Name: "db", Needs: []int{2}, Resources: 2, Phase: "pending"},
			{Name: "migrate", Needs: []int{3, 4}, Resources: 1, Phase: "pending"},
			{Name: "app", Resources: 1, Phase: "pending"},
			{Name: "unsequenced", Resources: 3, Phase: "pending"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sequenceStatus("install", sequencing.Planned{Plan: shopPlan, Deleting: tt.deleting})
			if got.Action != "install" || !slices.EqualFunc(got.Batches, tt.want, sameBatch) {
				t.Errorf("batches\n got: %+v\nwant: %+v", got.Batches, tt.want)
			}
			if !slices.Equal(got.Warnings, shopPlan.Warnings) {
				t.Errorf("warnings %q, want the plan's", got.Warnings)
			}
		})
	}
}

func sameBatch(a, b v2.SequenceBatch) bool {
	return a.Name == b.Name && slices.Equal(a.Needs, b.Needs) && a.Resources == b.Resources && a.Phase == b.Phase && a.Detail == b.Detail
}

// The observer keeps the status's plan current, and reports progress as
// trace events and what holds a deletion as a warning.
func TestSequenceObserverStatusAndEvents(t *testing.T) {
	obj := &v2.HelmRelease{}
	log := eventlog.New(20)
	o := newSequenceObserver(obj, "install", v2.BeforeHooks, log, nil)
	o.planned(sequencing.Planned{Plan: shopPlan})
	o.observe(sequencing.Progress{Index: 1, Total: 4, Batch: "db", Phase: sequencing.PhaseApplying, Resources: []string{"StatefulSet/db"}})
	o.observe(sequencing.Progress{Index: 1, Total: 4, Batch: "db", Phase: sequencing.PhaseReady})
	o.observe(sequencing.Progress{Index: 2, Total: 4, Batch: "migrate", Phase: sequencing.PhaseWaiting, Detail: "Job/migrate: Job in progress"})
	// A removal's batches belong to the revision replaced: not shown.
	o.observe(sequencing.Progress{Index: 1, Total: 1, Batch: "db", Phase: sequencing.PhaseDeleting, Removal: true})
	o.observe(sequencing.Progress{Index: 3, Total: 4, Batch: "app", Phase: sequencing.PhaseStuck, Detail: "ConfigMap/held: held by finalizer(s) example.com/block"})

	phases := []string{}
	for _, b := range obj.Status.Sequence.Batches {
		phases = append(phases, b.Phase+" "+b.Detail)
	}
	want := []string{"ready ", "waiting Job/migrate: Job in progress", "stuck ConfigMap/held: held by finalizer(s) example.com/block", "pending "}
	if !slices.Equal(phases, want) {
		t.Errorf("phases %q, want %q", phases, want)
	}

	close(log.Events)
	var events []string
	for e := range log.Events {
		events = append(events, e)
	}
	wantPrefixes := []string{
		"Trace " + ResourceGroupAppliedReason + " Resource group db (1/4) applied: StatefulSet/db",
		"Trace " + ResourceGroupReadyReason + " Resource group db (1/4) is ready",
		"Trace " + ResourceGroupDeletingReason + " Resource group db (1/1) deleting",
		corev1.EventTypeWarning + " " + ResourceGroupStuckReason + " Resource group app (3/4) not deleted: ConfigMap/held: held by finalizer(s) example.com/block",
	}
	if len(events) != len(wantPrefixes) {
		t.Fatalf("events %q, want %d", events, len(wantPrefixes))
	}
	for i, w := range wantPrefixes {
		if !strings.HasPrefix(events[i], w) {
			t.Errorf("event %d %q, want %q…", i, events[i], w)
		}
	}
}

// The batch events carry the attempt's revision and token, as every other
// event of the release, so that a ResourceGroupStuck or ResourceGroupWarning
// alert names the revision it is about.
func TestSequenceEventsCarryRevisionAndToken(t *testing.T) {
	obj := &v2.HelmRelease{}
	obj.Status.LastAttemptedRevision = "2.0.0"
	obj.Status.LastAttemptedConfigDigest = "sha256:attempt"
	rec := &annotatedRecorder{}
	o := newSequenceObserver(obj, "uninstall", v2.BeforeHooks, rec, nil)
	o.observe(sequencing.Progress{Index: 1, Total: 2, Batch: "app", Phase: sequencing.PhaseDeleting})
	o.observe(sequencing.Progress{Index: 1, Total: 2, Batch: "app", Phase: sequencing.PhaseStuck, Detail: "ConfigMap/held: held by finalizer(s) example.com/block"})

	want := map[string]string{"helm.toolkit.fluxcd.io/revision": "2.0.0", "helm.toolkit.fluxcd.io/token": "sha256:attempt"}
	if len(rec.events) != 2 {
		t.Fatalf("got %d events, want 2: %+v", len(rec.events), rec.events)
	}
	for _, e := range rec.events {
		if !maps.Equal(e.meta, want) {
			t.Errorf("event %s %s carries %v, want %v", e.eventType, e.reason, e.meta, want)
		}
	}
}
