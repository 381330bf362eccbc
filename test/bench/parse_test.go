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
			DownloadsCounted: true, InstallDownloads: 1},
		{Controller: Ours, Releases: 30, TimeToReady: time.Minute, InstallCPU: time.Second, PeakRSSBytes: 1},
	}
	results := ResultTable(rows)
	want := [][]string{
		{"upstream", "10", "20.0", "4.0", "400", "100", "20.0", "n/a", "50", "30.0"},
		{"ours", "10", "10.0", "3.0", "300", "150", "10.0", "1/0", "40", "20.0"},
	}
	for i, cells := range want {
		if got := strings.Join(results.Rows[i], ","); got != strings.Join(cells, ",") {
			t.Errorf("result row %d = %s, want %s", i, got, strings.Join(cells, ","))
		}
	}
	// N=30 ran with ours alone, so only N=10 has ratios.
	ratios := RatioTable(rows)
	if len(ratios.Rows) != 1 || strings.Join(ratios.Rows[0], ",") != "10,0.50,0.75,1.50" {
		t.Errorf("ratio rows %q, want one: 10,0.50,0.75,1.50", ratios.Rows)
	}
	var md strings.Builder
	if err := WriteMarkdown(&md, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| --- | ---: |") || !strings.Contains(md.String(), "| N | time ours/upstream |") {
		t.Errorf("unexpected Markdown:\n%s", md.String())
	}
}
