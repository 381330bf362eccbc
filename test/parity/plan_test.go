package parity

import (
	"strings"
	"testing"
)

// An upgrade that recreates its migration Job (consent given), adds a
// ConfigMap, drops a Service, keeps a PVC and runs a pre and a post hook:
// the observations before and after it, as the e2e harness reads them.
var (
	planBefore = Observation{
		Conditions: map[string]string{"Released": "True/InstallSucceeded"},
		LastAction: "install",
		Storage:    []string{"v1 deployed"},
		Objects:    []string{"Deployment <ns>/app", "Job <ns>/migrate", "PersistentVolumeClaim <ns>/data", "Service <ns>/old"},
	}
	planAfter = Observation{
		Conditions: map[string]string{"Released": "True/UpgradeSucceeded"},
		LastAction: "upgrade",
		Storage:    []string{"v1 superseded", "v2 deployed"},
		Objects:    []string{"ConfigMap <ns>/settings", "Deployment <ns>/app", "Job <ns>/migrate"},
		Recreated:  []string{"Job <ns>/migrate", HookPrefix + "Job <ns>/pre"},
		HooksRun:   []string{"pre-upgrade Job/pre", "post-upgrade Job/post"},
	}
	planOfUpgrade = Prediction{
		Verb:     "upgrade",
		Create:   []string{"ConfigMap <ns>/settings"},
		Delete:   []string{"Service <ns>/old"},
		Keep:     []string{"PersistentVolumeClaim <ns>/data"},
		Recreate: []string{"Job <ns>/migrate"},
		Hooks:    []string{"pre-upgrade Job/pre", "post-upgrade Job/post"},
	}
)

func TestComparePlan(t *testing.T) {
	failed := planAfter
	failed.Conditions = map[string]string{"Released": "False/UpgradeFailed"}
	failed.Objects, failed.Recreated, failed.HooksRun = planBefore.Objects, nil, []string{"pre-upgrade Job/pre"}
	refused := planOfUpgrade
	refused.Recreate, refused.Refused = nil, []string{"Job <ns>/migrate"}
	noOp := planBefore
	noOp.Conditions = map[string]string{"Released": "True/InstallSucceeded"}

	tests := []struct {
		name          string
		plan          Prediction
		before, after Observation
		want          []string // a substring of each difference, in order
	}{
		{name: "the plan of the upgrade, as it happened", plan: planOfUpgrade, before: planBefore, after: planAfter},
		{
			// Planted: the plan omits the recreate.
			name: "a plan that omits the recreate", plan: changedPlan(planOfUpgrade, func(p *Prediction) { p.Recreate = nil }),
			before: planBefore, after: planAfter,
			want: []string{"recreated: only in the plan [], only done [Job <ns>/migrate]"},
		},
		{
			name: "a plan that names another action", plan: changedPlan(planOfUpgrade, func(p *Prediction) { p.Verb = "install" }),
			before: planBefore, after: planAfter,
			want: []string{"action: the plan said install, the controller ran upgrade"},
		},
		{
			name: "hooks in another order", plan: changedPlan(planOfUpgrade, func(p *Prediction) { p.Hooks = []string{"post-upgrade Job/post", "pre-upgrade Job/pre"} }),
			before: planBefore, after: planAfter,
			want: []string{"hooks in order: the plan said [post-upgrade Job/post, pre-upgrade Job/pre]"},
		},
		{
			name: "a kept object the plan calls deleted and a created one it missed",
			plan: changedPlan(planOfUpgrade, func(p *Prediction) { p.Create, p.Keep = nil, nil }), before: planBefore, after: planAfter,
			want: []string{"created: only in the plan [], only done [ConfigMap <ns>/settings]", "deleted or kept: only in the plan [], only done [PersistentVolumeClaim <ns>/data]"},
		},
		{
			name: "a failed upgrade: only the action is compared", plan: planOfUpgrade, before: planBefore, after: failed,
		},
		{
			name: "a planned refusal that succeeded", plan: refused, before: planBefore, after: planAfter,
			want: []string{"the plan said upgrade fails on Job <ns>/migrate", "recreated: only in the plan [], only done [Job <ns>/migrate]"},
		},
		{name: "a planned refusal that failed", plan: refused, before: planBefore, after: failed},
		{
			// Helm pruned storage to maxHistory as it added v7.
			name: "an upgrade whose new revision pruned the oldest", plan: planOfUpgrade,
			before: changedObservation(planBefore, func(o *Observation) {
				o.Storage = []string{"v2 superseded", "v3 superseded", "v4 superseded", "v5 superseded", "v6 deployed"}
			}),
			after: changedObservation(planAfter, func(o *Observation) {
				o.Storage = []string{"v3 superseded", "v4 superseded", "v5 superseded", "v6 superseded", "v7 deployed"}
			}),
		},
		{
			// ingress-nginx's admission RBAC runs before and after the
			// apply; Helm keeps its last run only.
			name: "a hook of both phases, seen in its last run",
			plan: changedPlan(planOfUpgrade, func(p *Prediction) {
				p.Hooks = []string{"pre-upgrade Role/rbac", "pre-upgrade Job/pre", "post-upgrade Role/rbac", "post-upgrade Job/post"}
			}),
			before: planBefore,
			after: changedObservation(planAfter, func(o *Observation) {
				o.HooksRun = []string{"pre-upgrade Job/pre", "post-upgrade Role/rbac", "post-upgrade Job/post"}
			}),
		},
		{
			// The generated timed Job with ttlSecondsAfterFinished: 0 was
			// gone before the install was observed, and r0 before the
			// upgrade that replaced it with r1, also gone by then.
			name: "Jobs that deleted themselves before the observation",
			plan: changedPlan(planOfUpgrade, func(p *Prediction) {
				p.Create = append(p.Create, "Job <ns>/timed-r1")
				p.Delete = append(p.Delete, "Job <ns>/timed-r0")
				p.SelfDeleting = []string{"Job <ns>/timed-r0", "Job <ns>/timed-r1"}
			}),
			before: planBefore, after: planAfter,
		},
		{
			// The same without the mark: the comparison is not blind to
			// an ordinary Job the action did not make.
			name:   "a planned Job that was never made",
			plan:   changedPlan(planOfUpgrade, func(p *Prediction) { p.Create = append(p.Create, "Job <ns>/timed-r1") }),
			before: planBefore, after: planAfter,
			want: []string{"created: only in the plan [Job <ns>/timed-r1], only done []"},
		},
		{
			// A self-deleting Job still there before the step, gone after
			// although the manifest keeps it: its TTL, not the action.
			name:   "a Job of both manifests that its TTL deleted during the step",
			plan:   changedPlan(planOfUpgrade, func(p *Prediction) { p.SelfDeleting = []string{"Job <ns>/seed"} }),
			before: changedObservation(planBefore, func(o *Observation) { o.Objects = append(o.Objects, "Job <ns>/seed") }),
			after:  planAfter,
		},
		{name: "nothing planned, nothing done", before: planBefore, after: noOp},
		{
			name: "nothing planned, a revision made", before: planBefore, after: planAfter,
			want: []string{"revisions: the plan said nothing changes", "created: only in the plan [], only done [ConfigMap <ns>/settings]",
				"deleted or kept", "recreated: only in the plan [], only done [Job <ns>/migrate]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ComparePlan(tt.plan, tt.before, tt.after)
			if len(got) != len(tt.want) {
				t.Fatalf("ComparePlan = %d differences, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i, want := range tt.want {
				if !strings.Contains(got[i], want) {
					t.Errorf("difference %d = %q, want it to contain %q", i, got[i], want)
				}
			}
		})
	}
}

func changedObservation(o Observation, change func(*Observation)) Observation {
	change(&o)
	return o
}

func changedPlan(p Prediction, change func(*Prediction)) Prediction {
	change(&p)
	return p
}
