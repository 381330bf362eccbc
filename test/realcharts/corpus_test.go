package realcharts

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// TestCorpusRenders renders every chart of the corpus with its simulation
// values: a chart that a values change or a new pin breaks fails here,
// without a cluster. Skipped when the tool cache has no charts.
func TestCorpusRenders(t *testing.T) {
	charts, err := Corpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) < 12 {
		t.Errorf("the corpus has %d charts, the issue asks for at least 12", len(charts))
	}
	bin, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		t.Run(c.Name, func(t *testing.T) {
			dir, err := c.Dir(bin)
			if err != nil {
				t.Skip(err.Error())
			}
			cov, err := Cover(dir, c.Name, "corpus", c.Sim.Values)
			if err != nil {
				t.Fatal(err)
			}
			if cov.Objects == 0 {
				t.Errorf("%s renders no object", c.Name)
			}
			if c.Sim.Deadlock && !slices.Contains(cov.HookPhases, "post-install") {
				t.Errorf("%s is listed as a deadlock chart but has no post-install hook: %v", c.Name, cov.HookPhases)
			}
			// The full parity steps' values change must pass the chart's
			// schema and render.
			if _, err := Cover(dir, c.Name, "corpus", c.Sim.ChangedValues("values")); err != nil {
				t.Errorf("with the values change: %v", err)
			}
			t.Logf("%s: %d objects; %v", c.Name, cov.Objects, cov.Features())
		})
	}
}

func TestParseLine(t *testing.T) {
	versions := map[string]string{"example.com/m": "v1.0.0"}
	tests := []struct {
		line, wantErr string
	}{
		{line: "vault HashiCorp example.com/m .", wantErr: ""},
		{line: "vault HashiCorp example.com/m", wantErr: "want <name> <project> <module> <path>"},
		{line: "vault HashiCorp example.com/other .", wantErr: "go.mod does not require"},
		{line: "unknown Someone example.com/m .", wantErr: "no entry in the simulation table"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			c, err := parseLine(tt.line, versions)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
			case tt.wantErr == "" && c.ModuleVersion() != "example.com/m@v1.0.0":
				t.Errorf("got %s", c.ModuleVersion())
			}
		})
	}
}

func TestChangedValues(t *testing.T) {
	tests := []struct {
		name string
		sim  Simulation
		want string
	}{
		{name: "podAnnotations by default", sim: Simulation{},
			want: `map[podAnnotations:map[parity.afterhooks.io/step:v]]`},
		{name: "beside the chart's values", sim: Simulation{Values: map[string]any{"controller": map[string]any{"a": 1}},
			ChangePath: []string{"controller", "podLabels"}},
			want: `map[controller:map[a:1 podLabels:map[parity.afterhooks.io/step:v]]]`},
		{name: "into an existing map", sim: Simulation{Values: map[string]any{"labels": map[string]any{"x": "y"}},
			ChangePath: []string{"labels"}},
			want: `map[labels:map[parity.afterhooks.io/step:v x:y]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := fmt.Sprint(tt.sim.Values)
			if got := fmt.Sprint(tt.sim.ChangedValues("v")); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if after := fmt.Sprint(tt.sim.Values); after != before {
				t.Errorf("the simulation's values changed: %s, were %s", after, before)
			}
		})
	}
}
