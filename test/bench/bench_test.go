package bench

import (
	"strings"
	"testing"
)

// testLog sends progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestFleetOfTwenty runs the whole benchmark on a small fleet with both
// controllers. It checks that both get every release Ready and that the
// table is complete, never what the numbers are: they depend on the machine.
func TestFleetOfTwenty(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two clusters and two controllers")
	}
	const releases = 20
	rows, err := Run(t.Context(), Options{
		Releases:    []int{releases},
		Controllers: []string{Upstream, Ours},
		Progress:    testLog{t},
	})
	if err != nil {
		t.Fatalf("benchmark: %v", err)
	}
	if len(rows) != 2 {
		t.Fatalf("got %d rows, want one per controller: %+v", len(rows), rows)
	}
	for i, want := range []string{Upstream, Ours} {
		if rows[i].Controller != want || rows[i].Releases != releases {
			t.Errorf("row %d is %s with %d releases, want %s with %d", i, rows[i].Controller, rows[i].Releases, want, releases)
		}
	}
	for _, table := range []Table{ResultTable(rows), RatioTable(rows)} {
		wantFilled(t, table)
	}
	// Run fails a run whose fleet gained a revision at rest (no-op phase,
	// restart); this shows the restart was measured at all.
	for _, r := range rows {
		if r.RestartTime <= 0 || r.NewRevisions != 0 {
			t.Errorf("%s: restart took %s with %d new revisions, want a measured restart and none", r.Controller, r.RestartTime, r.NewRevisions)
		}
	}
	var text strings.Builder
	if err := WriteText(&text, rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
}

// TestShardsOfAFleet runs ours as two shards on a small fleet. Run fails
// the run if a shard's controller reconciled a release of the other
// shard, or if the fleet gained a revision at rest or over the restart.
func TestShardsOfAFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and two controllers")
	}
	const releases, shards = 8, 2
	rows, err := Run(t.Context(), Options{
		Releases:    []int{releases},
		Controllers: []string{Ours},
		Shards:      shards,
		Progress:    testLog{t},
	})
	if err != nil {
		t.Fatalf("benchmark: %v", err)
	}
	if len(rows) != 1 || rows[0].Shards != shards || rows[0].RestartTime <= 0 {
		t.Fatalf("rows %+v, want one of %d shards with a measured restart", rows, shards)
	}
	wantFilled(t, ResultTable(rows))
}

// wantFilled fails t for a table without rows or with an empty cell.
func wantFilled(t *testing.T, table Table) {
	t.Helper()
	if len(table.Rows) == 0 {
		t.Errorf("table %v has no rows", table.Header)
	}
	for _, row := range table.Rows {
		if len(row) != len(table.Header) {
			t.Errorf("row %q has %d cells for %d columns", row, len(row), len(table.Header))
		}
		for i, cell := range row {
			if strings.TrimSpace(cell) == "" {
				t.Errorf("row %q: column %q is empty", row, table.Header[min(i, len(table.Header)-1)])
			}
		}
	}
}
