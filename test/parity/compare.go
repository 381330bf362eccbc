package parity

import (
	"fmt"
	"strings"
)

// Key names one expected difference: a scenario (a chart's name, for the
// real charts; AnyScenario for every one), the mode ours ran in and the
// field, at the step named Step, or at any step when Step is "".
type Key struct {
	Scenario, Mode, Field, Step string
}

// AnyScenario in a Key lists a difference every scenario may show.
const AnyScenario = "*"

// listed is the key of expected that covers field at step of one of
// scenarios in mode, most specific first, and whether there is one.
func listed(expected map[Key]string, scenarios []string, mode, field, step string) (Key, bool) {
	var keys []Key
	for _, scenario := range scenarios {
		keys = append(keys, Key{scenario, mode, field, step}, Key{scenario, mode, field, ""})
	}
	keys = append(keys, Key{AnyScenario, mode, field, step}, Key{AnyScenario, mode, field, ""})
	for _, key := range keys {
		if _, ok := expected[key]; ok {
			return key, true
		}
	}
	return Key{}, false
}

// Row is one difference: the step, the field, upstream's value and ours.
type Row struct{ Step, Field, Upstream, Ours string }

// Compare lists the fields where ours differs from upstream, step by
// step, except those expected lists for (scenario, ours.Mode, field);
// it marks in used each listed difference it saw. Runs of different
// lengths (a step one side never reached) differ in a "steps" row.
func Compare(scenario string, upstream, ours Run, expected map[Key]string, used map[Key]bool) []Row {
	return CompareScenarios([]string{scenario}, upstream, ours, expected, used)
}

// CompareScenarios is Compare for a scenario known under several names
// (a generated scenario, by the keys of its features): a difference
// expected lists under any of them is no row.
func CompareScenarios(scenarios []string, upstream, ours Run, expected map[Key]string, used map[Key]bool) []Row {
	var rows []Row
	for i := range min(len(upstream.Steps), len(ours.Steps)) {
		step := upstream.Steps[i].Name
		if name := ours.Steps[i].Name; name != step {
			rows = append(rows, Row{fmt.Sprintf("#%d", i+1), "step", step, name})
			continue
		}
		theirs, mine := upstream.Steps[i].Observation.Fields(), ours.Steps[i].Observation.Fields()
		for j, f := range theirs {
			if f.Value == mine[j].Value {
				continue
			}
			if key, ok := listed(expected, scenarios, ours.Mode, f.Name, step); ok {
				used[key] = true
				continue
			}
			rows = append(rows, Row{step, f.Name, f.Value, mine[j].Value})
		}
	}
	if len(upstream.Steps) != len(ours.Steps) {
		rows = append(rows, Row{"-", "steps", stepNames(upstream), stepNames(ours)})
	}
	return rows
}

func stepNames(r Run) string {
	names := make([]string, len(r.Steps))
	for i, s := range r.Steps {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// FormatRows is the table of rows: step, field, upstream, ours.
func FormatRows(rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-22s | %-26s | %-40s | %s\n", "step", "field", "upstream", "ours")
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-22s | %-26s | %-40s | %s\n", r.Step, r.Field, orDash(r.Upstream), orDash(r.Ours))
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
