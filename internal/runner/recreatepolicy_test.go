package runner

import (
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// One recreate policy per release: the very instance the runner made
// reaches the action stack in the plan of every action that updates
// objects, and drift correction recreates with the same policy (its gate,
// release and memory); the memory is the controller's, shared by every
// release.
func TestOneRecreatePolicyPerRelease(t *testing.T) {
	memory := recreate.NewMemory()
	settings := Settings{Config: action.Config{RecreateImmutable: true}, Recreations: memory}
	obj := testRelease(func(o *v2.HelmRelease) {
		o.Spec.TargetNamespace = "shop"
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Timeout: &metav1.Duration{Duration: 42 * time.Second}}}
	})
	r := newRunner(memoryConfig(), obj, settings)
	policy := r.settings.Recreate
	want := recreate.Policy{Gate: true, Release: recreate.Release{Name: "shop-web", Namespace: "shop"}, Memory: memory}
	if policy == nil || !samePolicy(*policy, want) {
		t.Fatalf("the release's policy %+v, want %+v", policy, want)
	}

	for _, v := range []plan.Verb{plan.Install, plan.Upgrade, plan.Rollback} {
		if got := r.call(r.planFor(v)).Plan.Recreate; got != policy {
			t.Errorf("%s: the action stack gets policy %p, not the release's %p", v, got, policy)
		}
	}
	rollback, err := r.rollbackPlan(0)
	if err != nil {
		t.Fatal(err)
	}
	if rollback.Recreate != policy {
		t.Errorf("the rollback that follows its revision gets policy %p, not the release's %p", rollback.Recreate, policy)
	}
	resumed := r.resumePlan(nil)
	if resumed.Recreate != policy {
		t.Errorf("a resumed wait gets policy %p, not the release's %p", resumed.Recreate, policy)
	}

	drift := r.driftOptions()
	if !samePolicy(drift.Recreate, *policy) || drift.Recreate.Memory != memory {
		t.Errorf("drift correction recreates with %+v, not the release's policy %+v", drift.Recreate, *policy)
	}
	if drift.RecreateTimeout != 42*time.Second {
		t.Errorf("drift recreates end after %s, want the upgrade's timeout", drift.RecreateTimeout)
	}

	other := newRunner(memoryConfig(), testRelease(), settings)
	if other.settings.Recreate == policy || other.settings.Recreate.Memory != memory {
		t.Error("another release shares this release's policy, or not the controller's memory")
	}
}

// The gate off leaves consent to the annotation alone; no memory is made
// up when the controller has none.
func TestRecreatePolicyWithoutGateOrMemory(t *testing.T) {
	r := newRunner(memoryConfig(), testRelease(), Settings{})
	if p := r.settings.Recreate; p.Gate || p.Memory != nil || p.Release.Name != "web" {
		t.Errorf("policy %+v", *p)
	}
	for _, v := range []plan.Verb{plan.Uninstall, plan.Test} {
		if r.planFor(v).Recreate != nil {
			t.Errorf("%s recreates", v)
		}
	}
}

// samePolicy tells whether a and b decide alike: the same gate, release
// and memory (the very instance), and no consents carried over.
func samePolicy(a, b recreate.Policy) bool {
	return a.Gate == b.Gate && a.Release == b.Release && a.Memory == b.Memory &&
		len(a.RolledBackFrom) == 0 && len(b.RolledBackFrom) == 0
}
