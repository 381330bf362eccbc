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

// Each controller's runs, by increasing N, give one row per step: CPU per
// release at both ends, its change, and the RSS each added release cost;
// shards and single sizes give none.
func TestScalingTable(t *testing.T) {
	rows := []Row{
		{Controller: Ours, Releases: 400, InstallCPU: 36 * time.Second, PeakRSSBytes: 140 << 20},
		{Controller: Upstream, Releases: 100, InstallCPU: 13 * time.Second, PeakRSSBytes: 170 << 20},
		{Controller: Ours, Releases: 100, InstallCPU: 10 * time.Second, PeakRSSBytes: 110 << 20},
		{Controller: Ours, Releases: 2000, InstallCPU: 190 * time.Second, PeakRSSBytes: 300 << 20},
		{Controller: Ours, Releases: 2000, Shards: 4, InstallCPU: time.Hour},
	}
	got := ScalingTable(rows).Rows
	want := [][]string{
		{"ours", "100", "400", "100", "90", "-10", "102"},
		{"ours", "400", "2000", "90", "95", "+6", "102"},
	}
	if len(got) != len(want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("row %d = %q, want %q", i, got[i], want[i])
		}
	}
}
