package bench

import (
	"strings"
	"testing"
	"time"
)

func TestSumMetric(t *testing.T) {
	exposition := `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 10
apiserver_request_total{code="201",verb="POST",note="a } b"} 2.5
apiserver_request_total_other 100
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 7 1700000000000
helm_controller_chart_downloads_total 3
`
	for name, want := range map[string]float64{
		"apiserver_request_total":               12.5,
		"rest_client_requests_total":            7,
		"helm_controller_chart_downloads_total": 3,
	} {
		got, err := sumMetric(exposition, name)
		if err != nil || got != want {
			t.Errorf("sumMetric(%s) = %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := sumMetric(exposition, "missing_total"); err == nil {
		t.Error("an absent metric must be an error, not zero")
	}
}

func TestParseProcFiles(t *testing.T) {
	// A command name with spaces and a parenthesis, then utime 150, stime 50.
	stat := "4242 (helm (ctl) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 150 50 0 0 20 0 12 0 1 2 3"
	cpu, err := parseCPUTicks(stat)
	if err != nil || cpu != 2*time.Second {
		t.Errorf("parseCPUTicks = %s, %v; want 2s", cpu, err)
	}
	if _, err := parseCPUTicks("4242 (short) S 1"); err == nil {
		t.Error("a truncated stat line must be an error")
	}
	status := "Name:\thelm-controller\nVmPeak:\t 2000 kB\nVmHWM:\t  153600 kB\nVmRSS:\t 100 kB\n"
	peak, err := parsePeakRSS(status)
	if err != nil || peak != 150<<20 {
		t.Errorf("parsePeakRSS = %d, %v; want %d", peak, err, 150<<20)
	}
}

func TestTables(t *testing.T) {
	rows := []Row{
		{Controller: Upstream, Releases: 10, TimeToReady: 20 * time.Second, InstallCPU: 4 * time.Second,
			NoopCPU: 200 * time.Millisecond, APIRequests: 500, ControllerRequests: 300, PeakRSSBytes: 100 << 20},
		{Controller: Ours, Releases: 10, TimeToReady: 10 * time.Second, InstallCPU: 3 * time.Second,
			NoopCPU: 100 * time.Millisecond, APIRequests: 400, ControllerRequests: 200, PeakRSSBytes: 150 << 20,
			DownloadsCounted: true, InstallDownloads: 1, RestartTime: 5 * time.Second, RestartCPU: 1500 * time.Millisecond},
		{Controller: Ours, Releases: 30, TimeToReady: time.Minute, InstallCPU: time.Second, PeakRSSBytes: 1},
		// Shards are never paired with upstream's single controller.
		{Controller: Upstream, Releases: 30, TimeToReady: time.Minute, InstallCPU: time.Second, PeakRSSBytes: 1, Shards: 4},
	}
	results := ResultTable(rows)
	want := [][]string{
		{"upstream", "10", "20.0", "4.0", "400", "100", "20.0", "n/a", "50", "30.0", "n/a", "n/a", "n/a"},
		{"ours", "10", "10.0", "3.0", "300", "150", "10.0", "1/0", "40", "20.0", "5.0", "1.5", "0"},
		{"ours", "30", "60.0", "1.0", "33", "0", "0.0", "n/a", "0", "0.0", "n/a", "n/a", "n/a"},
		{"upstream, 4 shards", "30", "60.0", "1.0", "33", "0", "0.0", "n/a", "0", "0.0", "n/a", "n/a", "n/a"},
	}
	for i, cells := range want {
		if got := strings.Join(results.Rows[i], ","); got != strings.Join(cells, ",") {
			t.Errorf("result row %d = %s, want %s", i, got, strings.Join(cells, ","))
		}
	}
	// N=30 ran with ours alone (upstream only sharded), so only N=10 has ratios.
	ratios := RatioTable(rows)
	if len(ratios.Rows) != 1 || strings.Join(ratios.Rows[0], ",") != "10,0.50,0.75,1.50,0.50" {
		t.Errorf("ratio rows %q, want one: 10,0.50,0.75,1.50,0.50", ratios.Rows)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| --- | ---: |") || !strings.Contains(md.String(), "| N | time ours/upstream |") {
		t.Errorf("unexpected Markdown:\n%s", md.String())
	}
}

func TestReconciledObjects(t *testing.T) {
	exposition := `# TYPE gotk_reconcile_duration_seconds histogram
gotk_reconcile_duration_seconds_bucket{kind="HelmRelease",name="podinfo-1",namespace="bench",le="1"} 1
gotk_reconcile_duration_seconds_count{kind="HelmRelease",name="podinfo-1",namespace="bench"} 2
gotk_reconcile_duration_seconds_count{kind="HelmRelease",name="podinfo-2",namespace="bench"} 0
gotk_reconcile_duration_seconds_count{kind="HelmChart",name="bench-podinfo-3",namespace="bench"} 1
gotk_reconcile_duration_seconds_count{namespace="apps",name="say \"hi\"",kind="HelmRelease"} 1
`
	got, err := reconciledObjects(exposition, "HelmRelease")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"bench/podinfo-1": true, `apps/say \"hi\"`: true}
	if len(got) != len(want) {
		t.Fatalf("reconciled %v, want %v", got, want)
	}
	for name := range want {
		if !got[name] {
			t.Errorf("reconciled %v, want %v", got, want)
		}
	}
}

func TestOutsideTheirShard(t *testing.T) {
	// Four releases dealt to two shards: 0 and 2 to shard1, 1 and 3 to shard2.
	own := []map[string]bool{{"bench/podinfo-0": true, "bench/podinfo-2": true}, {"bench/podinfo-1": true}}
	if got := outsideTheirShard(own, 4); len(got) != 0 {
		t.Errorf("each shard reconciled its own, got %q", got)
	}
	// shard2 handled podinfo-2 too (a selector that matched everything),
	// and shard1 a release not of the fleet.
	crossed := []map[string]bool{{"bench/podinfo-0": true, "other/x": true}, {"bench/podinfo-1": true, "bench/podinfo-2": true}}
	want := "bench/podinfo-2 reconciled by shard2,other/x reconciled by shard1"
	if got := strings.Join(outsideTheirShard(crossed, 4), ","); got != want {
		t.Errorf("outsideTheirShard = %s, want %s", got, want)
	}
}

func TestRequestsByKind(t *testing.T) {
	before := `apiserver_request_total{code="200",resource="helmreleases",subresource="status",verb="PATCH"} 10
apiserver_request_total{code="200",resource="pods",subresource="",verb="GET"} 4
`
	after := `apiserver_request_total{code="200",resource="helmreleases",subresource="status",verb="PATCH"} 50
apiserver_request_total{code="409",resource="helmreleases",subresource="status",verb="PATCH"} 10
apiserver_request_total{code="200",resource="pods",subresource="",verb="GET"} 24
apiserver_request_total{code="201",resource="events",verb="POST"} 10
`
	b, err := requestsByKind(before)
	if err != nil {
		t.Fatal(err)
	}
	a, err := requestsByKind(after)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := topGrowth(b, a, 10, 2), "PATCH helmreleases/status 5.0, GET pods 2.0"; got != want {
		t.Errorf("topGrowth = %q, want %q", got, want)
	}
}
