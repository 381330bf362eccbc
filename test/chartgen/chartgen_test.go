package chartgen

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/realcharts"
)

func TestGenerateIsDeterministic(t *testing.T) {
	for _, seed := range []uint64{0, 1, 42, 1 << 63} {
		a, b := Generate(seed), Generate(seed)
		if !reflect.DeepEqual(a, b) || !maps.Equal(a.Files(), b.Files()) {
			t.Errorf("seed %d: two scenarios:\n%s\n%s", seed, a, b)
		}
	}
	if Generate(1).String() == Generate(2).String() {
		t.Errorf("seeds 1 and 2 drew the same scenario: %s", Generate(1))
	}
}

// TestGeneratedChartsRender renders the charts of many seeds with Helm,
// with the values of every step, and checks that together they cover the
// whole grammar.
func TestGeneratedChartsRender(t *testing.T) {
	keys := map[string]bool{}
	policies := map[string]bool{}
	var ttl, weighted, crds, immutableUpgrades bool
	for seed := range uint64(300) {
		s := Generate(seed)
		dir := t.TempDir()
		if err := s.Write(dir); err != nil {
			t.Fatal(err)
		}
		for i, step := range s.Steps {
			cov, err := realcharts.Cover(dir, "gen", "ns", s.Values(i))
			if err != nil {
				t.Fatalf("%s, step %s: %v", s, step, err)
			}
			for _, p := range cov.DeletePolicies {
				policies[p] = true
			}
			ttl = ttl || cov.TTLHookJobs > 0
			weighted = weighted || cov.Weighted
			crds = crds || cov.CRDsDir > 0
			immutableUpgrades = immutableUpgrades || step == StepImmutableUpgrade
		}
		for _, k := range s.Keys() {
			keys[k] = true
		}
	}
	for _, phase := range hookPhases {
		if !keys["hook/"+phase] {
			t.Errorf("no scenario has a %s hook", phase)
		}
	}
	for _, k := range []string{"workload/ready", "workload/slow", "workload/crashloop", "workload/needs-hook",
		"immutable/job-template", "immutable/service-clusterip+consent", "immutable/deployment-selector",
		"keep", "crd", "hook/post-install/fails"} {
		if !keys[k] {
			t.Errorf("no scenario has %s", k)
		}
	}
	for _, p := range []string{"before-hook-creation", "hook-succeeded", "hook-failed"} {
		if !policies[p] {
			t.Errorf("no hook has delete policy %s", p)
		}
	}
	if !ttl || !weighted || !crds || !immutableUpgrades {
		t.Errorf("ttl %v weighted %v crds %v immutable upgrades %v: want all", ttl, weighted, crds, immutableUpgrades)
	}
}

func TestValuesFollowSteps(t *testing.T) {
	s := Scenario{Steps: []Step{StepInstall, StepUpgrade, StepImmutableUpgrade, StepUninstall}}
	tests := []struct {
		last                int
		revision, immutable int
	}{{0, 0, 0}, {1, 1, 0}, {2, 2, 1}, {3, 2, 1}}
	for _, tt := range tests {
		want := map[string]any{"revision": tt.revision, "immutable": tt.immutable}
		if got := s.Values(tt.last); !reflect.DeepEqual(got, want) {
			t.Errorf("after step %d: %v, want %v", tt.last, got, want)
		}
	}
}

func TestWithoutDropsOneFeature(t *testing.T) {
	s := Scenario{Seed: 7, Features: []Feature{Keep{}, CRD{}, Workload{Behaviour: BehaviourSlow}},
		Steps: []Step{StepInstall, StepUninstall}}
	got := s.Without(1)
	if want := []Feature{Keep{}, Workload{Behaviour: BehaviourSlow}}; !reflect.DeepEqual(got.Features, want) {
		t.Errorf("Without(1) = %v, want %v", got.Features, want)
	}
	if len(s.Features) != 3 || !slices.Equal(got.Steps, s.Steps) {
		t.Errorf("Without changed the scenario or its steps: %v", s)
	}
	for path := range got.Files() {
		if strings.HasPrefix(path, "crds/") {
			t.Errorf("the dropped CRD is still written: %s", path)
		}
	}
}

// TestFaultsAndStepsByHand: over many seeds, every step done by hand, the
// controller kill at every moment and every timed Job turn up; a
// rollback by hand comes only after a step that made a revision to go
// back from.
func TestFaultsAndStepsByHand(t *testing.T) {
	steps := map[Step]bool{}
	kills := map[time.Duration]bool{}
	jobs := map[string]bool{}
	drift := false
	for seed := range uint64(300) {
		s := Generate(seed)
		made := false
		for _, st := range s.Steps {
			steps[st] = true
			if st == StepHelmRollback && !made {
				t.Errorf("%s: a rollback by hand before any upgrade", s)
			}
			made = made || st == StepUpgrade || st == StepImmutableUpgrade || st == StepHelmUpgrade || st == StepHelmUpgradeWait
		}
		if slices.Contains(s.Steps, StepUpgradeKilled) {
			kills[s.KillAfter] = true
		}
		if s.Steps[0] != StepInstall || s.Steps[len(s.Steps)-1] != StepUninstall {
			t.Errorf("%s: want install first and uninstall last", s)
		}
		for _, f := range s.Features {
			if j, ok := f.(TimedJob); ok {
				jobs[fmt.Sprintf("%s/%s", j.Key(), j.Delay)] = true
			}
		}
		drift = drift || s.Drift
	}
	for _, st := range []Step{StepHelmUpgrade, StepHelmUpgradeWait, StepHelmRollback, StepHelmUninstall, StepKubectlDelete,
		StepKubectlEdit, StepDeleteReleaseSecret, StepUpgradeKilled} {
		if !steps[st] {
			t.Errorf("no scenario has the step %q", st)
		}
	}
	for _, at := range killMoments {
		if !kills[at] {
			t.Errorf("no scenario kills the controller %s into an upgrade", at)
		}
	}
	for _, key := range []string{"timed-job", "timed-job/fails", "timed-job/fails-ttl"} {
		for _, d := range timedJobDelays {
			if !jobs[fmt.Sprintf("%s/%s", key, d)] {
				t.Errorf("no scenario has a %s after %s", key, d)
			}
		}
	}
	if !drift {
		t.Error("no scenario turns drift detection on")
	}
}
