package runner

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// What internal/action tells the observer of an action reaches the user
// under that action's name: recreated objects, the hook cleanup and the
// ordered batches (status.sequence names the verb).
func TestObserverNamesTheAction(t *testing.T) {
	for _, v := range []plan.Verb{plan.Install, plan.Upgrade, plan.Rollback} {
		rec := &captureRecorder{}
		r := newRunner(memoryConfig(), testRelease(), Settings{Recorder: rec})
		obs := r.call(r.planFor(v)).Observer
		obs.Recreated(recreate.Recreated{Object: "Job/apps/migrate", Fields: "spec.template", Propagation: metav1.DeletePropagationOrphan})
		if len(rec.events) != 1 {
			t.Fatalf("%s: events %+v", v, rec.events)
		}
		e := rec.events[0]
		if e.reason != ResourceRecreatedReason || e.action != v.EventAction().String() || !strings.Contains(e.message, "its pods were kept") {
			t.Errorf("%s: event %+v", v, e)
		}
	}
}

func TestObserverHookResources(t *testing.T) {
	tests := []struct {
		name          string
		deleted, left []string
		want          []string
	}{
		{name: "deleted and left", deleted: []string{"Job/apps/a"}, left: []string{"ConfigMap/apps/b (kept)"},
			want: []string{HookResourcesDeletedReason, HookResourcesLeftReason}},
		{name: "deleted only", deleted: []string{"Job/apps/a"}, want: []string{HookResourcesDeletedReason}},
		{name: "left only", left: []string{"ConfigMap/apps/b (kept)"}, want: []string{HookResourcesLeftReason}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &captureRecorder{}
			r := newRunner(memoryConfig(), testRelease(), Settings{Recorder: rec})
			r.call(r.planFor(plan.Uninstall)).Observer.HookResources(tt.deleted, tt.left)
			var got []string
			for _, e := range rec.events {
				got = append(got, e.reason)
				if e.action != helmv2.ActionHelmUninstall.String() || e.eventtype != corev1.EventTypeNormal || !strings.Contains(e.message, "release web") {
					t.Errorf("event %+v", e)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("reasons %v, want %v", got, tt.want)
			}
		})
	}
}

// recordingProgress keeps what the runner reported.
type recordingProgress struct {
	obj  *v2.HelmRelease
	msgs []string
}

func (p *recordingProgress) Report(msg string) { p.msgs = append(p.msgs, msg) }
func (p *recordingProgress) Update(change func(*v2.HelmRelease), msg string) {
	change(p.obj)
	p.msgs = append(p.msgs, msg)
}

func TestObserverSequencePlannedNamesTheVerb(t *testing.T) {
	obj := testRelease()
	progress := &recordingProgress{obj: obj}
	r := newRunner(memoryConfig(), obj, Settings{Progress: progress})
	obs := r.call(r.planFor(plan.Rollback)).Observer
	obs.SequencePlanned(sequencing.Planned{Plan: shopPlan})
	obs.Sequence(sequencing.Progress{Batch: "db", Index: 1, Total: 4, Phase: sequencing.PhaseApplying, Resources: []string{"StatefulSet/db"}})
	if seq := obj.Status.Sequence; seq == nil || seq.Action != string(plan.Rollback) || seq.Batches[0].Phase != "applying" {
		t.Errorf("status.sequence %+v, want the rollback's, db applying", seq)
	}
	if len(progress.msgs) != 2 || !strings.Contains(progress.msgs[1], "StatefulSet/db") {
		t.Errorf("progress %q: the batch was not reported", progress.msgs)
	}
}

// Failures before Helm runs: an invalid post renderer fails the install
// and the upgrade without touching storage; an uninstall of a release
// that is not there succeeds, as upstream's does.
func TestActionFailuresBeforeHelm(t *testing.T) {
	obj := testRelease(func(o *v2.HelmRelease) {
		o.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "{not: [yaml"}}}}}
	})
	r := newRunner(memoryConfig(), obj, Settings{})
	r.writes = &action.WriteLog{}
	if _, err := r.Install(t.Context(), nil, nil, ownrevision.Mark{}); err == nil || !strings.HasPrefix(err.Error(), "invalid post renderer") {
		t.Errorf("install with an invalid post renderer: %v", err)
	}
	if _, err := r.Upgrade(t.Context(), nil, nil, ownrevision.Mark{}); err == nil || !strings.HasPrefix(err.Error(), "invalid post renderer") {
		t.Errorf("upgrade with an invalid post renderer: %v", err)
	}
	if all, _ := r.cfg.Releases.ListReleases(); len(all) != 0 {
		t.Errorf("%d releases stored", len(all))
	}

	cfg := memoryConfig()
	cfg.KubeClient = &kubefake.PrintingKubeClient{}
	gone := newRunner(cfg, testRelease(), Settings{})
	if err := gone.Uninstall(t.Context()); err != nil {
		t.Errorf("uninstall of a missing release: %v", err)
	}
}
