package bench

import (
	"strings"
	"testing"
	"time"
)

func TestReconcilesOfKind(t *testing.T) {
	exposition := `# TYPE gotk_reconcile_duration_seconds histogram
gotk_reconcile_duration_seconds_count{kind="HelmRelease",name="podinfo-0",namespace="fleet"} 3
gotk_reconcile_duration_seconds_count{kind="HelmRelease",name="podinfo-1",namespace="fleet"} 2
gotk_reconcile_duration_seconds_count{kind="HelmChart",name="fleet-podinfo-0",namespace="fleet"} 7
gotk_reconcile_duration_seconds_sum{kind="HelmRelease",name="podinfo-0",namespace="fleet"} 0.5
`
	got, err := reconcilesOfKind(exposition, "HelmRelease")
	if err != nil || got != 5 {
		t.Errorf("reconcilesOfKind = %v, %v; want 5 (counts of HelmReleases only)", got, err)
	}
}

// A window of a quarter hour is scaled by four; per release divides by N;
// runs without a steady phase have no row.
func TestSteadyTable(t *testing.T) {
	rows := []Row{
		{Controller: Upstream, Releases: 10},
		{Controller: Ours, Releases: 10, Steady: SteadyState{
			Interval: 10 * time.Minute, Window: 15 * time.Minute, Reconciles: 15,
			CPU: 3 * time.Second, APIRequests: 250, ControllerRequests: 100,
		}},
		{Controller: Ours, Releases: 20, Shards: 2, Steady: SteadyState{Interval: time.Minute, Window: time.Hour}},
	}
	table := SteadyTable(rows)
	if len(table.Rows) != 2 {
		t.Fatalf("%d rows, want 2 (the runs that measured the steady state):\n%v", len(table.Rows), table.Rows)
	}
	want := []string{"ours", "10", "10m0s", "900", "1.50", "12.0", "200.0", "100.0", "40.0"}
	if got := table.Rows[0]; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("row = %q\nwant  %q", got, want)
	}
	if got := table.Rows[1]; got[0] != "ours, 2 shards" || got[6] != notAvailable {
		t.Errorf("a run without reconciles in its window: %q, want ours, 2 shards and n/a CPU per reconcile", got)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| controller CPU per hour (s) |") {
		t.Errorf("the Markdown lacks the steady table:\n%s", md.String())
	}
}
