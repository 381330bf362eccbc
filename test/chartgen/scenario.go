package chartgen

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Step is one thing a scenario does to its HelmRelease.
type Step string

const (
	// StepInstall creates the HelmRelease.
	StepInstall Step = "install"
	// StepUpgrade raises the `revision` value.
	StepUpgrade Step = "upgrade"
	// StepImmutableUpgrade raises `revision` and `immutable`, changing
	// the immutable fields of the scenario's immutable objects.
	StepImmutableUpgrade Step = "immutable upgrade"
	// StepUninstall deletes the HelmRelease.
	StepUninstall Step = "uninstall"
)

// Steps done by hand between two reconciles, as people do: each is
// followed by a requested reconcile (reconcile.fluxcd.io/requestedAt).
const (
	// StepHelmUpgrade is `helm upgrade --reuse-values --wait=false` of the
	// release with its own chart.
	StepHelmUpgrade Step = "helm upgrade by hand"
	// StepHelmUpgradeWait is the same with --wait.
	StepHelmUpgradeWait Step = "helm upgrade --wait by hand"
	// StepHelmRollback is `helm rollback` to the previous revision.
	StepHelmRollback Step = "helm rollback by hand"
	// StepHelmUninstall is `helm uninstall` of the release.
	StepHelmUninstall Step = "helm uninstall by hand"
	// StepKubectlDelete deletes one object of the release.
	StepKubectlDelete Step = "kubectl delete"
	// StepKubectlEdit changes, on one object of the release, a field the
	// chart sets: drift, which drift detection corrects when the
	// scenario turns it on (Scenario.Drift).
	StepKubectlEdit Step = "kubectl edit"
	// StepDeleteReleaseSecret deletes the Secret of the release's latest
	// revision.
	StepDeleteReleaseSecret Step = "delete the latest release Secret"
	// StepUpgradeKilled raises `revision` as StepUpgrade does and kills
	// the controller Scenario.KillAfter after Helm stored the new
	// revision, then starts it again.
	StepUpgradeKilled Step = "upgrade, controller killed"
)

// ByHand tells the steps done by hand (with the helm CLI or kubectl)
// apart from the spec changes.
func (st Step) ByHand() bool {
	switch st {
	case StepHelmUpgrade, StepHelmUpgradeWait, StepHelmRollback, StepHelmUninstall, StepKubectlDelete,
		StepKubectlEdit, StepDeleteReleaseSecret:
		return true
	}
	return false
}

// Scenario is a chart, described by its features, and the steps run on
// it.
type Scenario struct {
	Seed     uint64
	Features []Feature
	Steps    []Step
	// Drift turns drift detection on in the HelmRelease.
	Drift bool
	// KillAfter is how long after Helm stored the upgrade's revision
	// StepUpgradeKilled kills the controller.
	KillAfter time.Duration
}

// Name is the chart's name: it carries the seed, so that scenarios
// never share a chart.
func (s Scenario) Name() string { return fmt.Sprintf("gen-%016x", s.Seed) }

// String describes the scenario in one line: seed, features, steps.
func (s Scenario) String() string {
	features := make([]string, len(s.Features))
	for i, f := range s.Features {
		features[i] = f.String()
	}
	steps := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		steps[i] = string(st)
	}
	var release []string
	if s.Drift {
		release = append(release, "drift detection")
	}
	if slices.Contains(s.Steps, StepUpgradeKilled) {
		release = append(release, fmt.Sprintf("kill after %s", s.KillAfter))
	}
	extra := ""
	if len(release) > 0 {
		extra = " (" + strings.Join(release, ", ") + ")"
	}
	return fmt.Sprintf("seed %d: [%s] steps %s%s", s.Seed, strings.Join(features, ", "), strings.Join(steps, " > "), extra)
}

// Keys are the feature keys of the scenario, each once, in order.
func (s Scenario) Keys() []string {
	seen := map[string]bool{}
	var keys []string
	for _, f := range s.Features {
		if k := f.Key(); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// TestsEnabled tells whether the scenario has a test hook, which the
// HelmRelease must enable to run.
func (s Scenario) TestsEnabled() bool {
	for _, f := range s.Features {
		if h, ok := f.(Hook); ok && h.Phase == "test" {
			return true
		}
	}
	return false
}

// Without is the scenario without its i-th feature, for shrinking a
// failing case; the steps stay.
func (s Scenario) Without(i int) Scenario {
	out := s
	out.Features = append(append([]Feature{}, s.Features[:i]...), s.Features[i+1:]...)
	return out
}

// maxFeatures is the most features a scenario draws.
const maxFeatures = 5

// Generate draws the scenario of seed: one to maxFeatures features and
// the steps.
func Generate(seed uint64) Scenario {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Scenario{Seed: seed}
	n := 1 + r.IntN(maxFeatures)
	for i := range n {
		s.Features = append(s.Features, drawFeature(r, i))
	}
	s.Steps = drawSteps(r, s.hasImmutable())
	s.drawFaults(rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)))
	return s
}

// drawFaults adds, from a second stream so that the features and steps
// the first one drew for a seed stay as they were: a Job that fails or
// succeeds at a drawn moment, steps done by hand, and a controller kill
// during an upgrade.
func (s *Scenario) drawFaults(r *rand.Rand) {
	if r.IntN(3) == 0 {
		s.Features = append(s.Features, drawTimedJob(r))
	}
	uninstall := s.Steps[len(s.Steps)-1]
	body := s.Steps[:len(s.Steps)-1]
	for range r.IntN(3) {
		at := 1 + r.IntN(len(body))
		body = slices.Insert(body, at, drawByHand(r, body[:at]))
	}
	if r.IntN(4) == 0 {
		s.KillAfter = killMoments[r.IntN(len(killMoments))]
		body = append(body, StepUpgradeKilled)
	}
	s.Steps = append(body, uninstall)
	s.Drift = slices.Contains(s.Steps, StepKubectlEdit) && r.IntN(2) == 0
}

// killMoments count from the new revision's storing: at once (pre hooks
// or the apply), while the hooks or the wait run, and mostly after.
var killMoments = []time.Duration{0, 1 * time.Second, 3 * time.Second, 8 * time.Second}

// drawByHand draws a step done by hand after the steps before: a
// rollback only once an upgrade made a revision to go back from.
func drawByHand(r *rand.Rand, before []Step) Step {
	choices := []Step{StepHelmUpgrade, StepHelmUpgradeWait, StepHelmUninstall, StepKubectlDelete, StepKubectlEdit,
		StepDeleteReleaseSecret}
	if slices.ContainsFunc(before, func(st Step) bool {
		return st == StepUpgrade || st == StepImmutableUpgrade || st == StepHelmUpgrade || st == StepHelmUpgradeWait
	}) {
		choices = append(choices, StepHelmRollback)
	}
	return choices[r.IntN(len(choices))]
}

func (s Scenario) hasImmutable() bool {
	for _, f := range s.Features {
		if _, ok := f.(Immutable); ok {
			return true
		}
	}
	return false
}

// drawSteps: install, zero to two upgrades (immutable ones only when the
// chart has immutable objects), uninstall.
func drawSteps(r *rand.Rand, immutable bool) []Step {
	steps := []Step{StepInstall}
	for range r.IntN(3) {
		if immutable && r.IntN(2) == 0 {
			steps = append(steps, StepImmutableUpgrade)
		} else {
			steps = append(steps, StepUpgrade)
		}
	}
	return append(steps, StepUninstall)
}

// Values are the HelmRelease values after the steps up to and
// including steps[last].
func (s Scenario) Values(last int) map[string]any {
	revision, immutable := 0, 0
	for _, st := range s.Steps[:last+1] {
		switch st {
		case StepUpgrade, StepUpgradeKilled:
			revision++
		case StepImmutableUpgrade:
			revision++
			immutable++
		}
	}
	return map[string]any{"revision": revision, "immutable": immutable}
}
