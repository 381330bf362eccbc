package e2e

import (
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartgen"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/parity"
	"github.com/afterhooks/helm-controller/test/realcharts"
)

// The settings of TestGeneratedParity.
const (
	// generatedCountEnv: how many generated scenarios to run; without it
	// the short set runs.
	generatedCountEnv = "HELM_CONTROLLER_PARITY_GENERATED"
	// generatedSeedEnv: the base seed; the first scenario's seed is the
	// base seed itself, so one seed with a count of 1 reproduces a case.
	generatedSeedEnv = "HELM_CONTROLLER_PARITY_SEED"
	// generatedConcurrencyEnv: how many scenarios run at once (default
	// generatedConcurrency).
	generatedConcurrencyEnv = "HELM_CONTROLLER_PARITY_CONCURRENCY"
	// generatedReportEnv: a file to write the run's report to
	// (docs/parity.md under make parity).
	generatedReportEnv = "HELM_CONTROLLER_PARITY_REPORT"
	// generatedSeedListEnv: a comma-separated list of seeds to run, each
	// as a scenario of its own; it overrides the count and the base seed.
	generatedSeedListEnv = "HELM_CONTROLLER_PARITY_SEEDS"
	// generatedShrinkEnv: "0" turns off shrinking a failing case.
	generatedShrinkEnv = "HELM_CONTROLLER_PARITY_SHRINK"
)

const (
	generatedConcurrency = 4
	// generatedTimeout is the HelmRelease's timeout: long enough for a
	// slow pod, short for a scenario that waits for what never comes.
	generatedTimeout = 25 * time.Second
)

// TestGeneratedParity runs charts that test/chartgen composes from
// seeds, each through its steps under upstream helm-controller and under
// ours in default mode, in fresh namespaces, and compares the two with
// the real-chart harness's comparison (test/parity): a difference
// that realChartsExpected does not list under one of the scenario's
// feature keys fails the test with its table, its seed and the command
// that reproduces it. make test runs the short set (generatedShortSeeds);
// HELM_CONTROLLER_PARITY_GENERATED asks for that many drawn scenarios
// (make parity), HELM_CONTROLLER_PARITY_SEEDS for a list.
func TestGeneratedParity(t *testing.T) {
	seeds, base := generatedScenarios(t)
	concurrency := generatedConcurrency
	if v, err := strconv.Atoi(os.Getenv(generatedConcurrencyEnv)); err == nil && v > 0 {
		concurrency = v
	}
	t.Logf("%d generated scenarios (%v), %d at a time", len(seeds), seeds, concurrency)
	report := newGeneratedReport(base, concurrency)
	var wg sync.WaitGroup
	slots := make(chan struct{}, concurrency)
	for _, seed := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { parityGenerated(t, chartgen.Generate(seed), report) })
		}()
	}
	wg.Wait()
	report.write(t)
}

// generatedShortSeeds are the scenarios make test runs when no count is
// given: together they do every step by hand and both faults, with the
// oracle watching both sides.
//   - 6: a controller kill during an upgrade with post-upgrade hooks;
//   - 8: a deleted release Secret, then helm upgrade --wait by hand;
//   - 12: kubectl delete after an immutable upgrade with consent;
//   - 16: an ordinary Job that fails 2 s after the apply and deletes
//     itself (upstream's Ready there is a known lie, logged);
//   - 18: kubectl edit under drift detection, then helm uninstall by hand;
//   - 20: helm rollback by hand after an immutable upgrade.
var generatedShortSeeds = []uint64{6, 8, 12, 16, 18, 20}

// generatedScenarios returns the seeds to run: those listed in
// generatedSeedListEnv; else the count generatedCountEnv asks for, from
// the base seed generatedSeedEnv (drawn when not given); else the short
// set. The base seed is 0 when none was used.
func generatedScenarios(t *testing.T) ([]uint64, uint64) {
	t.Helper()
	if list := os.Getenv(generatedSeedListEnv); list != "" {
		return parseSeedList(t, list), 0
	}
	count := os.Getenv(generatedCountEnv)
	if count == "" {
		return generatedShortSeeds, 0
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", generatedCountEnv, count)
	}
	base := mathrand.Uint64()
	if seed := os.Getenv(generatedSeedEnv); seed != "" {
		if base, err = strconv.ParseUint(seed, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an unsigned number", generatedSeedEnv, seed)
		}
	}
	t.Logf("%d generated scenarios from base seed %d; all again: %s=%d %s=%d", n, base, generatedSeedEnv, base, generatedCountEnv, n)
	return generatedSeeds(base, n), base
}

// parseSeedList reads generatedSeedListEnv.
func parseSeedList(t *testing.T, list string) []uint64 {
	t.Helper()
	var seeds []uint64
	for _, field := range strings.Split(list, ",") {
		seed, err := strconv.ParseUint(strings.TrimSpace(field), 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %q is no unsigned number", generatedSeedListEnv, list, field)
		}
		seeds = append(seeds, seed)
	}
	return seeds
}

// generatedSeeds: the base seed, then n-1 seeds drawn from it.
func generatedSeeds(base uint64, n int) []uint64 {
	r := mathrand.New(mathrand.NewPCG(base, 0))
	seeds := []uint64{base}
	for len(seeds) < n {
		seeds = append(seeds, r.Uint64())
	}
	return seeds
}

// reproduceCommand runs the scenario of seed alone.
func reproduceCommand(seed uint64) string {
	return fmt.Sprintf("make parity-seed SEED=%d  (or: %s=%d %s=1 go test -count=1 -run 'TestGeneratedParity/seed-%d$' ./test/e2e/)",
		seed, generatedSeedEnv, seed, generatedCountEnv, seed)
}

// parityGenerated runs scenario s under both controllers, compares and,
// on a difference, shrinks the scenario to the fewest features that
// still show one.
func parityGenerated(t *testing.T, s chartgen.Scenario, report *generatedReport) {
	t.Logf("scenario %s", s)
	start := time.Now()
	rows := runGeneratedPair(t, s, 0, report)
	result := generatedResult{scenario: s, rows: rows, took: time.Since(start)}
	if len(rows) > 0 && os.Getenv(generatedShrinkEnv) != "0" {
		smallest := shrinkGenerated(t, s, report)
		result.shrunk = &smallest
	}
	report.add(result)
	if len(rows) == 0 {
		return
	}
	msg := fmt.Sprintf("%s: ours (default) differs from upstream where no difference is listed:\n%s\nreproduce: %s",
		s, parity.FormatRows(rows), reproduceCommand(s.Seed))
	if result.shrunk != nil {
		msg += fmt.Sprintf("\nsmallest failing scenario: %s", result.shrunk)
	}
	t.Error(msg)
}

// shrinkGenerated drops s's features one at a time, keeping each drop
// after which ours still differs from upstream.
func shrinkGenerated(t *testing.T, s chartgen.Scenario, report *generatedReport) chartgen.Scenario {
	attempt := 0
	for i := 0; i < len(s.Features) && len(s.Features) > 1; {
		attempt++
		smaller := s.Without(i)
		if rows := runGeneratedPair(t, smaller, attempt, report); len(rows) > 0 {
			t.Logf("still differs without feature %d: %s", i, smaller)
			s = smaller
			continue
		}
		i++
	}
	return s
}

// runGeneratedPair publishes s's chart (attempt tells the shrinking
// attempts' charts apart), runs it under upstream, then under ours (one
// after the other: CRDs are cluster-scoped), and lists the unlisted
// differences.
func runGeneratedPair(t *testing.T, s chartgen.Scenario, attempt int, report *generatedReport) []parity.Row {
	t.Helper()
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	ref, err := env.Charts.AddChart(dir, chartserver.WithVersion(fmt.Sprintf("0.1.%d", attempt)))
	if err != nil {
		t.Fatalf("publishing %s: %v", s.Name(), err)
	}
	upstream := runGenerated(t, s, dir, ref, realModeUpstream, report)
	ours := runGenerated(t, s, dir, ref, realModeDefault, report)
	return report.compare(s, upstream, ours)
}

// generatedExpectPrefix prefixes a feature key in realChartsExpected.
const generatedExpectPrefix = "generated/"

// expectNames are the names realChartsExpected may list s's
// differences under: one per feature key, but a consent to recreating
// only where an upgrade changes the immutable fields.
func expectNames(s chartgen.Scenario) []string {
	immutableUpgrade := slices.Contains(s.Steps, chartgen.StepImmutableUpgrade)
	var names []string
	for _, f := range s.Features {
		if m, ok := f.(chartgen.Immutable); ok && m.Consent && !immutableUpgrade {
			continue
		}
		if name := generatedExpectPrefix + f.Key(); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	if slices.Contains(s.Steps, chartgen.StepUpgradeKilled) {
		names = append(names, generatedExpectPrefix+generatedKillKey)
	}
	if keepsHookRuns(s) {
		names = append(names, generatedExpectPrefix+generatedKeptHookRunKey)
	}
	if s.Drift && hasSelfDeletingJob(s) {
		names = append(names, generatedExpectPrefix+generatedSelfDeletedDriftKey)
	}
	return names
}

// generatedSelfDeletedDriftKey lists the differences of a scenario with
// drift detection and an ordinary Job with ttlSecondsAfterFinished: once
// the Job deleted itself, upstream counts it as drift and creates it again
// (running it once more) at every check; here it is not drift.
const generatedSelfDeletedDriftKey = "drift/self-deleted-job"

// hasSelfDeletingJob tells whether s's chart has an ordinary Job with
// ttlSecondsAfterFinished.
func hasSelfDeletingJob(s chartgen.Scenario) bool {
	for _, f := range s.Features {
		if j, ok := f.(chartgen.TimedJob); ok && j.TTL >= 0 {
			return true
		}
	}
	return false
}

// generatedKeptHookRunKey lists the differences of a scenario with a hook
// whose delete policy keeps its Job after some runs (hook-succeeded or
// hook-failed without before-hook-creation): when the hook runs again,
// upstream's server-side create changes the finished Job in place and
// counts its old outcome (or fails on a changed template), while here
// the old run is deleted and the hook runs anew.
const generatedKeptHookRunKey = "hook/kept-run-again"

// keepsHookRuns tells whether one of s's hooks may leave its finished Job
// for its next run.
func keepsHookRuns(s chartgen.Scenario) bool {
	for _, f := range s.Features {
		h, ok := f.(chartgen.Hook)
		if ok && h.Policies != "" && !strings.Contains(h.Policies, "before-hook-creation") {
			return true
		}
	}
	return false
}

// runGenerated runs s's steps under mode in a fresh namespace and
// observes after each, as the real charts' steps are observed.
func runGenerated(t *testing.T, s chartgen.Scenario, dir string, ref chartserver.ChartRef, mode realMode, report *generatedReport) realRun {
	t.Helper()
	side, repo := startRealSide(t, realcharts.Chart{Name: s.Name()}, dir, mode, "gen")
	side.hr = framework.Sharded(generatedRelease(s, side.ns, repo, ref), side.ctl)
	side.plans = &report.plans
	run := realRun{Run: parity.Run{Mode: string(mode)}}
	for i, step := range s.Steps {
		side.runStep(t, &run, generatedStep(s, i, step, ref))
	}
	run.install = side.install
	return run
}

// generatedStep is step i of s as a real-chart step: the install and
// the uninstall are theirs; the steps done by hand and the killed upgrade
// are in generated_byhand_test.go; any other step sets the step's values
// and waits until the controller attempted them.
func generatedStep(s chartgen.Scenario, i int, step chartgen.Step, ref chartserver.ChartRef) realStep {
	if step.ByHand() {
		return byHandStep(step, ref)
	}
	switch step {
	case chartgen.StepUpgradeKilled:
		return killedUpgradeStep(s, i)
	case chartgen.StepInstall:
		return realStep{name: string(step), do: (*realSide).doInstall, next: (*realSide).unchanged}
	case chartgen.StepUninstall:
		return realStep{name: string(step), do: (*realSide).doUninstall, observe: (*realSide).uninstalledObservation}
	}
	values := func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSONFrom(s.Values(i)) }
	return realStep{name: string(step), do: func(side *realSide, t *testing.T) {
		env.PatchSpec(t, side.hr, values)
		side.settle(t, parityStep{name: string(step), settled: generatedSettled})
	}, next: func(side *realSide, t *testing.T) *v2.HelmRelease {
		hr := side.live(t)
		values(hr)
		return hr
	}}
}

// generatedRelease is s's HelmRelease in ns, with the values of its
// install.
func generatedRelease(s chartgen.Scenario, ns, repo string, ref chartserver.ChartRef) *v2.HelmRelease {
	hr := framework.Release(ns, "gen", repo, ref.Name, ref.Version, "")
	hr.Spec.Values = framework.JSONFrom(s.Values(0))
	hr.Spec.Timeout = &metav1.Duration{Duration: generatedTimeout}
	if s.TestsEnabled() {
		hr.Spec.Test = &helmv2.Test{Enable: true}
	}
	generatedDrift(s, hr)
	return hr
}

// generatedSettled: the controller attempted the current spec and ended
// Ready or stalled.
func generatedSettled(hr *v2.HelmRelease) error {
	if hr.Status.LastAttemptedGeneration != hr.Generation {
		return fmt.Errorf("generation %d not attempted yet: %s", hr.Generation, framework.Conditions(hr))
	}
	return parityInstallSettled(hr)
}

// generatedOutcomeFields are the fields that follow from a generated
// step's outcome: a difference in whether it succeeded shows in each,
// and an object recreated on one side only in "recreated" (a new uid).
// Drift detection runs only on a release that deployed, so "Drifted"
// follows the outcome too.
var generatedOutcomeFields = []string{meta.ReadyCondition, "Released", "TestSuccess", meta.StalledCondition, "Drifted",
	"Stalled message", "failures", "history", "storage", "hooks", "objects", "recreated", "events", "leftovers"}

func init() {
	// Generated scenarios (TestGeneratedParity), keyed by feature.
	//
	// An object that consents to being recreated is recreated here when
	// an upgrade changes its immutable field, and the upgrade goes on;
	// upstream does not know the consent and the upgrade fails.
	recreate := "an object annotated " + chartgen.ConsentAnnotation + ": enabled is recreated when an upgrade " +
		"changes an immutable field, where upstream's upgrade fails (docs/immutable.md; docs/differences.md, " +
		"\"Generated scenarios side by side\")"
	for _, feature := range chartgen.ConsentFeatures() {
		listGenerated(feature, recreate)
	}
	// A failing hook Job with ttlSecondsAfterFinished: upstream counts it
	// a success once its TTL deleted it; here a hook the wait saw fail
	// fails the release.
	ttl := "a failed Job that its TTL deleted is a failure here, a success upstream (docs/differences.md, " +
		"\"Jobs that failed and were then deleted by their TTL\")"
	for _, hook := range chartgen.FailingTTLHooks() {
		listGenerated(hook, ttl)
	}
	listGenerated(chartgen.TimedJob{Fails: true, TTL: 0}, ttl)
	// A kill lands at a different point of each controller's action, as
	// they run at different speeds: upstream may be interrupted where
	// ours already finished (a PendingRelease event, one more revision,
	// another failure count), and when the kill comes between Helm's
	// storing the pending revision and the status write, upstream clears
	// the history where ours keeps the revision it marked as its own.
	kill := "a controller kill lands at a different point of each controller's action, and a revision cut short " +
		"stays in status.history here where upstream may clear the history (docs/differences.md, \"A revision " +
		"cut short by a restart stays in the history\", and \"Generated scenarios side by side\")"
	listGeneratedFields(generatedKillKey, []string{"history", "storage", "events", "failures"}, kill)
	// A hook run again over the finished Job an earlier run left: a new
	// Job here (recreated), the old one's outcome upstream, whose upgrade
	// fails instead when the hook's template changed.
	rerun := "a hook whose delete policy kept its finished Job runs again here (the old run is deleted first); " +
		"upstream changes the old Job in place and counts its outcome, or fails on a changed template " +
		"(docs/differences.md, \"A hook Job kept from an earlier run\")"
	listGeneratedFields(generatedKeptHookRunKey, generatedOutcomeFields, rerun)
	// A Job that deleted itself is no drift here; upstream creates it
	// again at each drift check, runs it once more, and may fail on it.
	selfDeleted := "a Job with ttlSecondsAfterFinished that deleted itself is not drift here; upstream creates it " +
		"again at every drift check (docs/differences.md, \"A Job that deleted itself is not drift\")"
	listGeneratedFields(generatedSelfDeletedDriftKey, generatedOutcomeFields, selfDeleted)
	// A release uninstalled by hand after a failed install that a later
	// upgrade mended: upstream reads the install's old failure count as
	// retries used up and installs nothing until the spec changes, while
	// its Ready stays True for the release that is gone; here the retries
	// that count are those of the last action (an upgrade), so the
	// release is installed again at once.
	stale := "a release uninstalled by hand after a failed install that a later upgrade mended: upstream counts " +
		"the old install failure as retries used up, stalls, and keeps Ready True with nothing installed; here " +
		"it is installed again (docs/differences.md, \"An install failure mended by an upgrade\")"
	for _, field := range append([]string{"lastAttemptedReleaseAction"}, generatedOutcomeFields...) {
		key := parity.Key{Scenario: generatedExpectPrefix + generatedStaleInstallKey, Mode: string(realModeDefault),
			Field: field, Step: string(chartgen.StepHelmUninstall)}
		realChartsExpected[key] = stale
	}
	// Upstream installs at the next change of the spec, which ours
	// upgrades: every object made again on one side only.
	listGeneratedFields(generatedStaleInstallKey, []string{"recreated"}, stale)
}

// generatedStaleInstallKey lists the differences of a scenario whose
// release is uninstalled by hand while upstream's install failure count
// is above zero and its last action was an upgrade.
const generatedStaleInstallKey = "byhand/uninstall-after-mended-install"

// staleInstallFailureNames is the key of run's scenario (upstream's run)
// when a helm uninstall by hand came after a failed install and then an
// upgrade: the state before the step, the same on both sides, not what
// came of it.
func staleInstallFailureNames(run parity.Run) []string {
	for i, step := range run.Steps {
		if i == 0 || step.Name != string(chartgen.StepHelmUninstall) {
			continue
		}
		if before := run.Steps[i-1].Observation; before.InstallFailures > 0 && before.LastAction == "upgrade" {
			return []string{generatedExpectPrefix + generatedStaleInstallKey}
		}
	}
	return nil
}

// generatedKillKey lists the differences of a scenario that kills the
// controller during an upgrade (chartgen.StepUpgradeKilled).
const generatedKillKey = "fault/controller-kill"

// listGenerated lists in realChartsExpected a difference in every
// outcome field, at any step, for the generated feature.
func listGenerated(feature chartgen.Feature, reason string) {
	listGeneratedFields(feature.Key(), generatedOutcomeFields, reason)
}

// listGeneratedFields lists in realChartsExpected a difference in each of
// fields, at any step, under the generated key name.
func listGeneratedFields(name string, fields []string, reason string) {
	for _, field := range fields {
		key := parity.Key{Scenario: generatedExpectPrefix + name, Mode: string(realModeDefault), Field: field}
		realChartsExpected[key] = reason
	}
}
