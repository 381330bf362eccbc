package e2e

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/chartgen"
	"github.com/afterhooks/helm-controller/test/parity"
)

// generatedReport gathers TestGeneratedParity's results, from scenarios
// running at the same time, for docs/parity.md.
type generatedReport struct {
	mu          sync.Mutex
	base        uint64
	concurrency int
	start       time.Time
	results     []generatedResult
	// used marks the listed differences the scenarios showed.
	used map[parity.Key]bool
	// plans are ours' steps planned before they ran (issue 33).
	plans planTally
}

// generatedResult is one scenario's outcome: its unlisted differences,
// how long it took under both controllers, and the smallest scenario
// that still differs when it was shrunk.
type generatedResult struct {
	scenario chartgen.Scenario
	rows     []parity.Row
	took     time.Duration
	shrunk   *chartgen.Scenario
}

func newGeneratedReport(base uint64, concurrency int) *generatedReport {
	return &generatedReport{base: base, concurrency: concurrency, start: time.Now(), used: map[parity.Key]bool{}}
}

// compare lists the differences of ours from upstream in scenario s
// that realChartsExpected lists under none of its feature keys.
func (r *generatedReport) compare(s chartgen.Scenario, upstream, ours realRun) []parity.Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := append(expectNames(s), staleInstallFailureNames(upstream.Run)...)
	return parity.CompareScenarios(names, upstream.Run, ours.Run, realChartsExpected, r.used)
}

func (r *generatedReport) add(result generatedResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results = append(r.results, result)
}

// write writes the report where generatedReportEnv says, when it is set.
func (r *generatedReport) write(t *testing.T) {
	file := os.Getenv(generatedReportEnv)
	if file == "" {
		return
	}
	if err := os.WriteFile(file, []byte(r.markdown()), 0o644); err != nil {
		t.Errorf("writing the parity report: %v", err)
	}
}

func (r *generatedReport) markdown() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.SortFunc(r.results, func(a, b generatedResult) int { return strings.Compare(a.scenario.Name(), b.scenario.Name()) })
	var b strings.Builder
	b.WriteString("# Parity with upstream: generated scenarios\n\n")
	b.WriteString("Written by `make parity` (TestGeneratedParity in test/e2e, charts from test/chartgen); do not edit by hand.\n")
	b.WriteString("Each scenario's chart and steps run under upstream helm-controller v1.6.4 and under ours in default mode,\n")
	b.WriteString("and every step's observation is compared as TestRealChartsParity compares the real charts.\n\n")
	r.writeSummary(&b)
	r.writeDifferences(&b)
	r.writePlans(&b)
	r.writeListed(&b)
	r.writeFeatures(&b)
	r.writeScenarios(&b)
	return b.String()
}

func (r *generatedReport) writeSummary(b *strings.Builder) {
	var differing int
	var total time.Duration
	for _, res := range r.results {
		total += res.took
		if len(res.rows) > 0 {
			differing++
		}
	}
	wall := time.Since(r.start)
	fmt.Fprintf(b, "## Run\n\n| | |\n| --- | --- |\n")
	fmt.Fprintf(b, "| finished | %s |\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(b, "| scenarios | %d (%d with an unlisted difference) |\n", len(r.results), differing)
	fmt.Fprintf(b, "| base seed | %d (`%s=%d %s=%d`) |\n", r.base, generatedSeedEnv, r.base, generatedCountEnv, len(r.results))
	fmt.Fprintf(b, "| machine | %d CPUs, %d scenarios at a time |\n", runtime.NumCPU(), r.concurrency)
	fmt.Fprintf(b, "| wall time | %s |\n", wall.Round(time.Second))
	if len(r.results) > 0 {
		fmt.Fprintf(b, "| per scenario | %s on average under both controllers, %s of wall time |\n",
			(total / time.Duration(len(r.results))).Round(time.Second), (wall / time.Duration(len(r.results))).Round(time.Second))
	}
	b.WriteString("\n")
}

func (r *generatedReport) writeDifferences(b *strings.Builder) {
	b.WriteString("## Unlisted differences\n\n")
	found := false
	for _, res := range r.results {
		if len(res.rows) == 0 {
			continue
		}
		found = true
		fmt.Fprintf(b, "### %s\n\n```\n%s```\n\nReproduce: `%s`\n\n", res.scenario, parity.FormatRows(res.rows), reproduceCommand(res.scenario.Seed))
		if res.shrunk != nil {
			fmt.Fprintf(b, "Smallest failing scenario: %s\n\n", res.shrunk)
		}
	}
	if !found {
		b.WriteString("None.\n\n")
	}
}

// writePlans says how many of ours' steps were planned and where the
// controller did otherwise than its plan.
func (r *generatedReport) writePlans(b *strings.Builder) {
	r.plans.mu.Lock()
	defer r.plans.mu.Unlock()
	b.WriteString("## Plans against outcomes\n\n")
	fmt.Fprintf(b, "Before each install and upgrade step, ours was planned with `helm-controller plan` and, once the step\n"+
		"settled, the action, the objects created, deleted, kept and recreated and the hooks run in order were\n"+
		"compared with the plan (docs/plan.md). Steps planned: %d (shrinking attempts included); differences: %d.\n\n",
		r.plans.steps, len(r.plans.differences))
	for _, d := range r.plans.differences {
		fmt.Fprintf(b, "- %s\n", d)
	}
	if len(r.plans.differences) > 0 {
		b.WriteString("\n")
	}
}

// writeListed lists the differences of realChartsExpected (generated
// keys) that the scenarios showed, one line per feature with its fields.
func (r *generatedReport) writeListed(b *strings.Builder) {
	b.WriteString("## Listed differences seen\n\nEach is in `realChartsExpected` and in [differences.md](differences.md).\n\n")
	fields, reasons := map[string][]string{}, map[string]string{}
	for key := range r.used {
		if feature, ok := strings.CutPrefix(key.Scenario, generatedExpectPrefix); ok {
			fields[feature] = append(fields[feature], key.Field)
			reasons[feature] = realChartsExpected[key]
		}
	}
	if len(fields) == 0 {
		b.WriteString("None.\n\n")
		return
	}
	for _, feature := range slices.Sorted(maps.Keys(fields)) {
		slices.Sort(fields[feature])
		fmt.Fprintf(b, "- `%s` (%s): %s\n", feature, strings.Join(fields[feature], ", "), reasons[feature])
	}
	b.WriteString("\n")
}

// writeFeatures counts the scenarios that had each feature key.
func (r *generatedReport) writeFeatures(b *strings.Builder) {
	counts := map[string]int{}
	for _, res := range r.results {
		for _, k := range res.scenario.Keys() {
			counts[k]++
		}
		for _, st := range res.scenario.Steps {
			counts["step: "+string(st)]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteString("## Features covered\n\n| feature | scenarios |\n| --- | --- |\n")
	for _, k := range keys {
		fmt.Fprintf(b, "| %s | %d |\n", k, counts[k])
	}
	b.WriteString("\n")
}

func (r *generatedReport) writeScenarios(b *strings.Builder) {
	b.WriteString("## Scenarios\n\n| seed | features and steps | took | result |\n| --- | --- | --- | --- |\n")
	for _, res := range r.results {
		result := "same as upstream"
		if len(res.rows) > 0 {
			result = fmt.Sprintf("%d unlisted differences", len(res.rows))
		}
		description := strings.TrimPrefix(res.scenario.String(), fmt.Sprintf("seed %d: ", res.scenario.Seed))
		fmt.Fprintf(b, "| %d | %s | %s | %s |\n", res.scenario.Seed, description, res.took.Round(time.Second), result)
	}
}
