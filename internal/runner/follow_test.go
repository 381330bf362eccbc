package runner

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// revision stores revision v of the release "web" in r's storage; ordered
// revisions carry the sequencing record with one subchart fact.
func storeRevision(t *testing.T, r *Runner, v int, ordered bool, applyMethod string) {
	t.Helper()
	chrt := &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "web", Version: "1.0.0", APIVersion: chartv2.APIVersionV2}}
	if ordered {
		var err error
		if chrt, err = sequencing.Record(chrt, sequencing.Charts{"web": {}}); err != nil {
			t.Fatal(err)
		}
	}
	rel := &releasev1.Release{Name: "web", Namespace: "apps", Version: v, Chart: chrt, ApplyMethod: applyMethod,
		Manifest: "---\n# Source: web/templates/cm.yaml\nkind: ConfigMap\n", Info: &releasev1.Info{Status: common.StatusSuperseded}}
	if err := r.cfg.Releases.Create(rel); err != nil {
		t.Fatal(err)
	}
}

// A rollback follows the revision it restores: its order and its apply
// method, whatever the HelmRelease says now; the revision is read once,
// before the action.
func TestRollbackPlanFollowsTheRevision(t *testing.T) {
	tests := []struct {
		name        string
		toVersion   int
		spec        func(*v2.HelmRelease)
		wantOrder   string
		wantVersion int
		wantMethod  string
	}{
		{name: "to an ordered revision, from a spec that no longer orders", toVersion: 1,
			wantOrder: plan.FromRevision, wantVersion: 1, wantMethod: "csa"},
		{name: "0 is the revision before the last", toVersion: 0, wantVersion: 2, wantMethod: "ssa"},
		{name: "to a revision not applied in order, from an ordered spec", toVersion: 2,
			spec:        func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered} },
			wantVersion: 2, wantMethod: "ssa"},
		{name: "a revision that cannot be read: all at once, Helm says why", toVersion: 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := testRelease()
			if tt.spec != nil {
				tt.spec(obj)
			}
			r := newRunner(memoryConfig(), obj, Settings{})
			storeRevision(t, r, 1, true, "csa")
			storeRevision(t, r, 2, false, "ssa")
			storeRevision(t, r, 3, true, "ssa")
			p, err := r.rollbackPlan(tt.toVersion)
			if err != nil {
				t.Fatal(err)
			}
			if p.Ordering.From != tt.wantOrder || p.Revision.Version != tt.wantVersion || p.Revision.ApplyMethod != tt.wantMethod {
				t.Errorf("ordering %q, revision %+v; want %q, v%d %q", p.Ordering.From, p.Revision, tt.wantOrder, tt.wantVersion, tt.wantMethod)
			}
			if tt.wantOrder != "" && len(p.Ordering.Charts) != 1 {
				t.Errorf("recorded subchart facts %v, want the revision's", p.Ordering.Charts)
			}
			if p.Ordering.Manifest != "" {
				t.Error("a rollback learns no manifest: Helm renders the revision's own")
			}
		})
	}
}

// An uninstall deletes in the reverse of the order its newest revision was
// applied in, learning the objects from that revision's manifest; without
// a revision it runs all at once.
func TestUninstallPlanFollowsTheNewestRevision(t *testing.T) {
	r := newRunner(memoryConfig(), testRelease(), Settings{})
	p, err := r.uninstallPlan()
	if err != nil || p.Ordering.Ordered() || p.Revision.Version != 0 {
		t.Fatalf("without a revision: %+v, %v", p.Ordering, err)
	}
	storeRevision(t, r, 1, false, "")
	storeRevision(t, r, 2, true, "ssa")
	p, err = r.uninstallPlan()
	if err != nil {
		t.Fatal(err)
	}
	if p.Ordering.From != plan.FromRevision || p.Revision.Version != 2 || !strings.Contains(p.Ordering.Manifest, "ConfigMap") {
		t.Errorf("ordering %+v of revision %+v, want v2's order and manifest", p.Ordering, p.Revision)
	}
	if p.Recreate != nil || p.AfterHooks() {
		t.Error("an uninstall recreates nothing and never waits after hooks")
	}
}

// A revision whose sequencing record is broken fails the rollback and the
// uninstall before anything runs, naming the action and the revision.
func TestFollowBrokenRecordFails(t *testing.T) {
	r := newRunner(memoryConfig(), testRelease(), Settings{})
	chrt := &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "web", Annotations: map[string]string{sequencing.AnnotationRecord: "{"}}}
	for v := 1; v <= 2; v++ {
		rel := &releasev1.Release{Name: "web", Version: v, Chart: chrt, Info: &releasev1.Info{Status: common.StatusSuperseded}}
		if err := r.cfg.Releases.Create(rel); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.rollbackPlan(1); err == nil || !strings.HasPrefix(err.Error(), "rollback: release web v1:") {
		t.Errorf("rollback plan error %v", err)
	}
	if _, err := r.uninstallPlan(); err == nil || !strings.HasPrefix(err.Error(), "uninstall: release web v2:") {
		t.Errorf("uninstall plan error %v", err)
	}
	if err := r.Rollback(t.Context(), 1, ownrevision.Mark{}); err == nil || !strings.HasPrefix(err.Error(), "rollback:") {
		t.Errorf("Rollback ran with a broken record: %v", err)
	}
}

// A resumed wait is planned as the action that left the revision pending,
// read from its status.
func TestResumePlanIsTheActionThatLeftThePendingRevision(t *testing.T) {
	obj := testRelease(func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	})
	r := newRunner(memoryConfig(), obj, Settings{})
	for status, want := range map[common.Status]plan.Verb{
		common.StatusPendingInstall:  plan.Install,
		common.StatusPendingUpgrade:  plan.Upgrade,
		common.StatusPendingRollback: plan.Rollback,
	} {
		p := r.resumePlan(&releasev1.Release{Info: &releasev1.Info{Status: status}})
		if p.Verb != want || !p.Resumed {
			t.Errorf("%s: verb %s resumed %t, want %s", status, p.Verb, p.Resumed, want)
		}
	}
	if p := r.resumePlan(nil); p.Verb != plan.Install {
		t.Errorf("without a revision: %s, want install", p.Verb)
	}
}

// A rollback carries the recreate consents of the revision it rolls back
// from (the latest), not those of the one it restores, and shows them in
// the printed plan; the release's own policy keeps none.
func TestRollbackPlanCarriesTheConsentsItRollsBackFrom(t *testing.T) {
	r := newRunner(memoryConfig(), testRelease(), Settings{})
	storeRevision(t, r, 1, false, "ssa")
	consenting := &releasev1.Release{Name: "web", Namespace: "apps", Version: 2, Chart: &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "web", Version: "2.0.0", APIVersion: chartv2.APIVersionV2}},
		Manifest: "---\n# Source: web/templates/job.yaml\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.toolkit.fluxcd.io/force: enabled\n",
		Info:     &releasev1.Info{Status: common.StatusFailed}}
	if err := r.cfg.Releases.Create(consenting); err != nil {
		t.Fatal(err)
	}
	p, err := r.rollbackPlan(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.RolledBackFrom) != 1 {
		t.Fatalf("consents %v, want the Job revision 2 consented to", p.RolledBackFrom)
	}
	if !strings.Contains(p.String(), `"rolledBackFrom":["Job.batch/migrate"]`) {
		t.Errorf("printed plan %s, want the consent named", p.String())
	}
	if r.settings.Recreate != nil && len(r.settings.Recreate.RolledBackFrom) != 0 {
		t.Error("the release's policy took the rollback's consents")
	}
	if up := r.planFor(plan.Upgrade); len(up.RolledBackFrom) != 0 {
		t.Errorf("an upgrade carries consents %v, want none", up.RolledBackFrom)
	}
}

// An upgrade starts from the release's newest revision, whatever its
// status, as Helm's upgrade does (Storage.Last): serverSideApply auto is
// resolved from that revision's apply method before the action, and the
// preview plans the same; enabled and disabled do not look.
func TestUpgradePlanStartsFromTheNewestRevision(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		methods []string // stored revisions 1, 2, ...
		want    plan.Apply
	}{
		{name: "no revision: client-side, as Helm resolves auto without one", want: plan.Apply{Auto: true}},
		{name: "newest server-side, an older one client-side", methods: []string{"csa", "ssa"}, want: plan.Apply{Auto: true, ServerSide: true}},
		{name: "newest client-side, an older one server-side", methods: []string{"ssa", "csa"}, want: plan.Apply{Auto: true}},
		{name: "newest from Helm 3", methods: []string{"ssa", ""}, want: plan.Apply{Auto: true}},
		{name: "disabled ignores a server-side revision", mode: "disabled", methods: []string{"ssa"}, want: plan.Apply{}},
		{name: "enabled ignores a client-side revision", mode: "enabled", methods: []string{"csa"}, want: plan.Apply{ServerSide: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := testRelease(func(o *v2.HelmRelease) { o.Spec.Upgrade = &v2.Upgrade{} })
			obj.Spec.Upgrade.ServerSideApply = helmv2.ServerSideApplyMode(tt.mode)
			r := newRunner(memoryConfig(), obj, Settings{})
			for i, m := range tt.methods {
				storeRevision(t, r, i+1, false, m)
			}
			for _, p := range []func() (plan.Plan, error){
				func() (plan.Plan, error) { return r.upgradePlan(), nil },
				func() (plan.Plan, error) { return r.Plan(plan.Upgrade) },
			} {
				got, err := p()
				if err != nil {
					t.Fatal(err)
				}
				if got.Apply == nil || *got.Apply != tt.want {
					t.Errorf("apply %+v, want %+v", got.Apply, tt.want)
				}
			}
		})
	}
}
