package reliability

import (
	"strings"
	"testing"
)

// The rows with failed runs come again at the end of the report, each with
// its section, case and broken invariants; a report without failures adds
// nothing.
func TestFailedRowsRepeatOnlyFailures(t *testing.T) {
	var report table
	report.add(row{Section: "Faults", Case: "install: SIGKILL", Runs: 3})
	if got := report.failedRows(); got != "" {
		t.Errorf("failedRows of a table without failures = %q, want empty", got)
	}
	report.add(row{Section: "Load", Case: "200 releases", Runs: 2, Failures: []string{"revision lost", "Ready lied"}})
	got := report.failedRows()
	want := "FAILED Load / 200 releases: 2 of 2 runs: revision lost; Ready lied\n"
	if got != want {
		t.Errorf("failedRows = %q, want %q", got, want)
	}
	if strings.Contains(got, "SIGKILL") {
		t.Errorf("a passing row is repeated: %q", got)
	}
}
