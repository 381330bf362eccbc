package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Chart is one picture of how a figure scales with the fleet size: a
// line per controller, N on the x axis.
type Chart struct {
	// File is the SVG's name in the output directory.
	File  string
	Title string
	YAxis string
	// Value reads the figure off a row.
	Value func(Row) float64
}

// Charts are the pictures `make bench` draws: people read scaling from a
// curve faster than from a table.
var Charts = []Chart{
	{File: "bench-cpu-per-release.svg", Title: "Controller CPU per release (install)", YAxis: "CPU per release (ms)",
		Value: func(r Row) float64 { return float64(r.InstallCPU.Milliseconds()) / float64(r.Releases) }},
	{File: "bench-peak-rss.svg", Title: "Peak RSS of the controller", YAxis: "peak RSS (MiB)",
		Value: func(r Row) float64 { return float64(r.PeakRSSBytes) / (1 << 20) }},
	{File: "bench-time-to-ready.svg", Title: "Time from creation until every release is Ready", YAxis: "time to all Ready (s)",
		Value: func(r Row) float64 { return r.TimeToReady.Seconds() }},
}

// controllerColors keeps each controller's colour the same in every
// chart.
var controllerColors = map[string]color.Color{
	Upstream:       color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff},
	Ours:           color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	OursAfterHooks: color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// WritePlots draws every chart of Charts from rows into dir as SVG.
func WritePlots(dir string, rows []Row) error {
	if len(rows) == 0 {
		return fmt.Errorf("no measurements to draw")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	for _, c := range Charts {
		p, err := c.plot(rows)
		if err != nil {
			return fmt.Errorf("drawing %s: %w", c.File, err)
		}
		path := filepath.Join(dir, c.File)
		if err := p.Save(16*vg.Centimeter, 10*vg.Centimeter, path); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

// plot is the chart's picture of rows: one line with points per
// controller, in the order the controllers first appear.
func (c Chart) plot(rows []Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = "HelmReleases (N)"
	p.Y.Label.Text = c.YAxis
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	for _, controller := range controllersOf(rows) {
		points := c.points(rows, controller)
		line, dots, err := plotter.NewLinePoints(points)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", controller, err)
		}
		colour := controllerColors[controller]
		if colour == nil {
			colour = color.Black
		}
		line.Color, dots.Color, dots.Shape = colour, colour, draw.CircleGlyph{}
		p.Add(line, dots)
		p.Legend.Add(controller, line, dots)
	}
	return p, nil
}

// points are the chart's values for one controller, by growing N.
func (c Chart) points(rows []Row, controller string) plotter.XYs {
	var xys plotter.XYs
	for _, r := range rows {
		if controllerLabel(r.Controller, r.Shards) == controller {
			xys = append(xys, plotter.XY{X: float64(r.Releases), Y: c.Value(r)})
		}
	}
	slices.SortFunc(xys, func(a, b plotter.XY) int { return int(a.X - b.X) })
	return xys
}

// controllersOf lists the controllers of rows, each once, in the order
// they first appear.
func controllersOf(rows []Row) []string {
	var names []string
	for _, r := range rows {
		if name := controllerLabel(r.Controller, r.Shards); !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}
