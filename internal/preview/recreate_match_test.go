package preview_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// A plan of an upgrade whose Job the API server refuses in place says
// whether the Job is recreated, with whose consent, or which guard or
// missing consent stops it, with reads and dry runs only; then the state machine upgrades over the same
// API server, and the Jobs recreated (their UID changed) and the refusal
// the upgrade failed with are compared with the plan.
func TestPlanOfARecreateMatchesWhatHappens(t *testing.T) {
	tests := []struct {
		name     string
		gate     bool
		finished bool // the Job is Complete before the upgrade
		chart    func() *chartv2.Chart
		want     recreate.Verdict
	}{{
		name: "consent of the gate", gate: true, finished: true, chart: jobChart,
		want: recreate.Verdict{Recreate: true, Consent: recreate.ConsentGate},
	}, {
		name: "consent of the annotation", finished: true, chart: forcedJobChart,
		want: recreate.Verdict{Recreate: true, Consent: recreate.ConsentAnnotation},
	}, {
		name: "no consent", finished: true, chart: jobChart,
		want: recreate.Verdict{Refusal: "annotate it helm.toolkit.fluxcd.io/force: enabled (or turn on the RecreateImmutableResources feature gate) to let the controller recreate it"},
	}, {
		name: "a running Job stops it", gate: true, chart: jobChart,
		want: recreate.Verdict{Refusal: "not recreated: it is a Job that has not finished (neither Complete nor Failed)"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, rec := newRecordedEnv(t)
			e.settings.Config.RecreateImmutable = tt.gate
			obj := e.hr(noWait)
			e.reconcile(obj, tt.chart, values("a", "1"))
			if tt.finished {
				envtestserver.FinishJob(t, e.cs, e.ns, "migrate")
			}
			before := e.jobUIDs()

			rec.start()
			pv := e.preview(obj, tt.chart(), values("a", "2"))
			wantOnlyReads(t, "plan", rec.stop())
			if len(pv.Actions) != 1 || len(pv.Actions[0].Recreates) != 1 {
				t.Fatalf("actions %+v, want one upgrade with one refused object", pv.Actions)
			}
			got := pv.Actions[0].Recreates[0]
			if got.Recreate != tt.want.Recreate || got.Consent != tt.want.Consent ||
				!strings.HasPrefix(got.Refusal, tt.want.Refusal) || (tt.want.Refusal == "") != (got.Refusal == "") ||
				got.Object != "Job/"+e.ns+"/migrate" || !strings.Contains(got.Fields, "spec.template: ") {
				t.Errorf("planned %+v, want %+v", got, tt.want)
			}

			failure := e.reconcileMayFail(obj, tt.chart, values("a", "2"))
			outcome := recreateOutcome{recreated: changedUIDs(before, e.jobUIDs()), failure: failure}
			for _, d := range recreateDifferences(pv.Actions[0], outcome) {
				t.Error(d)
			}
		})
	}
}

// A plan that omits a recreate that happens, or plans one that does not,
// is reported by the comparison.
func TestRecreateDifferencesReportsAPlantedDifference(t *testing.T) {
	recreated := recreateOutcome{recreated: []string{"Job/apps/migrate"}}
	planned := preview.Action{Recreates: []recreate.Verdict{{Object: "Job/apps/migrate", Recreate: true}}}
	if d := recreateDifferences(planned, recreated); len(d) != 0 {
		t.Fatalf("a true plan: %q", d)
	}
	omitted := planned
	omitted.Recreates = nil
	if d := recreateDifferences(omitted, recreated); len(d) == 0 {
		t.Error("a plan that omits the recreate passes the comparison")
	}
	refusedInstead := preview.Action{Recreates: []recreate.Verdict{{Object: "Job/apps/migrate", Refusal: "not recreated: it is a Job that has not finished"}}}
	if d := recreateDifferences(refusedInstead, recreated); len(d) == 0 {
		t.Error("a plan that refuses what was recreated passes the comparison")
	}
	failed := recreateOutcome{failure: "Job/apps/migrate: spec.template: field is immutable; not recreated: it is a Job that has not finished"}
	if d := recreateDifferences(planned, failed); len(d) == 0 {
		t.Error("a plan that recreates what was refused passes the comparison")
	}
}

// recreateOutcome is what an action did with refused objects: those
// recreated (their UID changed), and the action's failure message.
type recreateOutcome struct {
	recreated []string
	failure   string
}

// recreateDifferences compares the recreates a plan predicted with what
// happened: every object planned to be recreated was, and none other;
// every refusal planned is the action's failure, with its reason.
func recreateDifferences(planned preview.Action, got recreateOutcome) []string {
	var want, diffs []string
	for _, v := range planned.Recreates {
		if v.Recreate {
			want = append(want, v.Object)
			continue
		}
		if !strings.Contains(got.failure, v.Object+": ") || !strings.Contains(got.failure, v.Refusal) {
			diffs = append(diffs, "the plan refuses "+v.Object+" ("+v.Refusal+"); the action failed with: "+got.failure)
		}
	}
	sort.Strings(want)
	if !slices.Equal(want, got.recreated) {
		diffs = append(diffs, "recreated: the plan says "+strings.Join(want, ", ")+"; the cluster shows "+strings.Join(got.recreated, ", "))
	}
	if len(want) > 0 && got.failure != "" && len(diffs) == 0 && !refusedAny(planned) {
		diffs = append(diffs, "the plan recreates and succeeds; the action failed with: "+got.failure)
	}
	return diffs
}

func refusedAny(a preview.Action) bool {
	return slices.ContainsFunc(a.Recreates, func(v recreate.Verdict) bool { return !v.Recreate })
}

// jobUIDs are the UIDs of the env's Jobs, by Kind/namespace/name.
func (e *env) jobUIDs() map[string]string {
	e.t.Helper()
	list, err := e.cs.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]string{}
	for _, j := range list.Items {
		out["Job/"+j.Namespace+"/"+j.Name] = string(j.UID)
	}
	return out
}

// changedUIDs are the objects of before whose UID is another in after,
// sorted.
func changedUIDs(before, after map[string]string) []string {
	var out []string
	for name, uid := range before {
		if now, ok := after[name]; ok && now != uid {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// noWait leaves out the readiness waits: the test API server runs no Job
// controller.
func noWait(o *v2.HelmRelease) {
	o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
	o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true}}
}

// forcedJobChart is jobChart with the Job annotated
// helm.toolkit.fluxcd.io/force: enabled.
func forcedJobChart() *chartv2.Chart {
	c := jobChart()
	c.Templates[0].Data = []byte(strings.Replace(string(c.Templates[0].Data), "  name: migrate\n",
		"  name: migrate\n  annotations:\n    helm.toolkit.fluxcd.io/force: enabled\n", 1))
	return c
}
