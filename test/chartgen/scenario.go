package chartgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
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

// Scenario is a chart, described by its features, and the steps run on
// it.
type Scenario struct {
	Seed     uint64
	Features []Feature
	Steps    []Step
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
	return fmt.Sprintf("seed %d: [%s] steps %s", s.Seed, strings.Join(features, ", "), strings.Join(steps, " > "))
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
	return s
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
		case StepUpgrade:
			revision++
		case StepImmutableUpgrade:
			revision++
			immutable++
		}
	}
	return map[string]any{"revision": revision, "immutable": immutable}
}
