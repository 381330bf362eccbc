package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestChartValues(t *testing.T) {
	row := Row{Controller: Ours, Releases: 400, InstallCPU: 20 * time.Second, PeakRSSBytes: 150 << 20, TimeToReady: 90 * time.Second}
	want := map[string]float64{
		"bench-cpu-per-release.svg": 50,
		"bench-peak-rss.svg":        150,
		"bench-time-to-ready.svg":   90,
	}
	for _, c := range Charts {
		if got := c.Value(row); got != want[c.File] {
			t.Errorf("%s: %v, want %v", c.File, got, want[c.File])
		}
	}
}

func TestChartPointsByController(t *testing.T) {
	rows := []Row{
		{Controller: Ours, Releases: 2000, TimeToReady: 300 * time.Second},
		{Controller: Upstream, Releases: 100, TimeToReady: 140 * time.Second},
		{Controller: Ours, Releases: 100, TimeToReady: 25 * time.Second},
		{Controller: Upstream, Releases: 400, TimeToReady: 548 * time.Second},
		{Controller: Ours, Releases: 400, TimeToReady: 80 * time.Second},
	}
	timeToReady := Charts[2]
	if got := controllersOf(rows); strings.Join(got, ",") != "ours,upstream" {
		t.Errorf("controllers %v, want ours, upstream in order of appearance", got)
	}
	ours := timeToReady.points(rows, Ours)
	if len(ours) != 3 || ours[0].X != 100 || ours[1].X != 400 || ours[2].X != 2000 || ours[2].Y != 300 {
		t.Errorf("ours' points %v, want N 100, 400, 2000 in order with 300 s at 2000", ours)
	}
	if up := timeToReady.points(rows, Upstream); len(up) != 2 || up[1].Y != 548 {
		t.Errorf("upstream's points %v, want two, 548 s at 400", up)
	}
}

func TestWritePlots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "charts")
	rows := []Row{
		{Controller: Upstream, Releases: 100, InstallCPU: 17 * time.Second, PeakRSSBytes: 120 << 20, TimeToReady: 140 * time.Second},
		{Controller: Ours, Releases: 100, InstallCPU: 8 * time.Second, PeakRSSBytes: 100 << 20, TimeToReady: 25 * time.Second},
		{Controller: Ours, Releases: 400, InstallCPU: 21 * time.Second, PeakRSSBytes: 110 << 20, TimeToReady: 80 * time.Second},
	}
	if err := WritePlots(dir, rows); err != nil {
		t.Fatal(err)
	}
	for _, c := range Charts {
		data, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		svg := string(data)
		for _, want := range []string{"<svg", c.Title, c.YAxis, ">upstream<", ">ours<"} {
			if !strings.Contains(svg, want) {
				t.Errorf("%s lacks %q", c.File, want)
			}
		}
	}
	if err := WritePlots(dir, nil); err == nil {
		t.Error("drawing no rows: no error")
	}
}
