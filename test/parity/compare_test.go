package parity

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// recorded reads the run TestRealChartsParity recorded
// (HELM_CONTROLLER_PARITY_RECORD) of podinfo-flagger under upstream
// helm-controller, every full step, and a copy of it as ours' default
// run: the same observations, which the tests plant differences in.
func recorded(t *testing.T) (upstream, ours Run) {
	t.Helper()
	run, err := ReadRun("testdata/podinfo-flagger.upstream.json")
	if err != nil {
		t.Fatal(err)
	}
	ours = clone(t, run)
	ours.Mode = "default"
	return run, ours
}

// clone is a deep copy of run, so that a plant leaves the recording as
// it is.
func clone(t *testing.T, run Run) Run {
	t.Helper()
	data, err := json.Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	var out Run
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// step is the observation of the step named name in run.
func step(t *testing.T, run *Run, name string) *Observation {
	t.Helper()
	for i := range run.Steps {
		if run.Steps[i].Name == name {
			return &run.Steps[i].Observation
		}
	}
	t.Fatalf("the recorded run has no step %q", name)
	return nil
}

// TestComparePlanted plants, in a copy of ours' recorded run, the
// differences issue 31 asks the harness to catch, and checks that
// Compare reports each as its table's rows, and only those.
func TestComparePlanted(t *testing.T) {
	upstream, ours := recorded(t)
	if rows := Compare("podinfo-flagger", upstream, ours, nil, map[Key]bool{}); len(rows) > 0 {
		t.Fatalf("the recorded runs differ before anything is planted:\n%s", FormatRows(rows))
	}
	installed := step(t, &upstream, "install")
	noOp := step(t, &upstream, "no-op reconcile")
	tests := []struct {
		name  string
		plant func(t *testing.T, ours *Run)
		want  []Row
	}{
		{
			name: "a changed reason",
			plant: func(t *testing.T, ours *Run) {
				step(t, ours, "install").Conditions["Ready"] = "True/UpgradeSucceeded"
			},
			want: []Row{{"install", "Ready", installed.Conditions["Ready"], "True/UpgradeSucceeded"}},
		},
		{
			name: "one extra revision",
			plant: func(t *testing.T, ours *Run) {
				obs := step(t, ours, "no-op reconcile")
				obs.History = append([]string{"v2 deployed podinfo@6.0.0 config sha256:extra"}, obs.History...)
				obs.Storage[len(obs.Storage)-1] = strings.Replace(obs.Storage[len(obs.Storage)-1], "deployed", "superseded", 1)
				obs.Storage = append(obs.Storage, "v2 deployed")
			},
			want: []Row{
				{"no-op reconcile", "history", strings.Join(noOp.History, "; "),
					"v2 deployed podinfo@6.0.0 config sha256:extra; " + strings.Join(noOp.History, "; ")},
				{"no-op reconcile", "storage", "v1 deployed", "v1 superseded; v2 deployed"},
			},
		},
		{
			name: "an object left after uninstall",
			plant: func(t *testing.T, ours *Run) {
				obs := step(t, ours, "uninstall")
				obs.Leftovers = append(obs.Leftovers, "Service <ns>/podinfo")
			},
			want: []Row{{"uninstall", "leftovers", "", "Service <ns>/podinfo"}},
		},
		{
			name: "an object made again",
			plant: func(t *testing.T, ours *Run) {
				obs := step(t, ours, "values change")
				obs.Recreated = append(obs.Recreated, "Deployment <ns>/podinfo")
			},
			want: []Row{{"values change", "recreated", "", "Deployment <ns>/podinfo"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			planted := clone(t, ours)
			tt.plant(t, &planted)
			rows := Compare("podinfo-flagger", upstream, planted, nil, map[Key]bool{})
			t.Logf("caught:\n%s", FormatRows(rows))
			if !slices.Equal(rows, tt.want) {
				t.Errorf("got rows\n%s\nwant\n%s", FormatRows(rows), FormatRows(tt.want))
			}
		})
	}
}

// TestCompareListed: a difference the list names is no row, whatever the
// step, and is marked seen; the same field of another scenario or mode
// still is a row.
func TestCompareListed(t *testing.T) {
	upstream, ours := recorded(t)
	step(t, &ours, "install").Conditions["Ready"] = "True/Planted"
	step(t, &ours, "resumed").Conditions["Ready"] = "True/Planted"
	tests := []struct {
		name     string
		listed   Key
		scenario string
		want     int
	}{
		{name: "listed", listed: Key{Scenario: "podinfo-flagger", Mode: "default", Field: "Ready"},
			scenario: "podinfo-flagger", want: 0},
		{name: "another scenario", listed: Key{Scenario: "podinfo-flagger", Mode: "default", Field: "Ready"},
			scenario: "cert-manager", want: 2},
		{name: "another mode", listed: Key{Scenario: "podinfo-flagger", Mode: "afterHooks", Field: "Ready"},
			scenario: "podinfo-flagger", want: 2},
		{name: "any scenario", listed: Key{Scenario: AnyScenario, Mode: "default", Field: "Ready"},
			scenario: "cert-manager", want: 0},
		{name: "at one step only", listed: Key{Scenario: "podinfo-flagger", Mode: "default", Field: "Ready", Step: "resumed"},
			scenario: "podinfo-flagger", want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[Key]bool{}
			rows := Compare(tt.scenario, upstream, ours, map[Key]string{tt.listed: "reason"}, used)
			if len(rows) != tt.want {
				t.Errorf("got %d rows, want %d:\n%s", len(rows), tt.want, FormatRows(rows))
			}
			if used[tt.listed] != (tt.want < 2) {
				t.Errorf("listed difference marked seen: %v", used[tt.listed])
			}
		})
	}
}

func TestCompareStepsDiffer(t *testing.T) {
	upstream := Run{Mode: "upstream", Steps: []Step{{Name: "install"}, {Name: "uninstall"}}}
	tests := []struct {
		name string
		ours Run
		want []Row
	}{
		{name: "a step missing", ours: Run{Mode: "default", Steps: []Step{{Name: "install"}}},
			want: []Row{{"-", "steps", "install, uninstall", "install"}}},
		{name: "another step", ours: Run{Mode: "default", Steps: []Step{{Name: "install"}, {Name: "resumed"}}},
			want: []Row{{"#2", "step", "uninstall", "resumed"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if rows := Compare("x", upstream, tt.ours, nil, map[Key]bool{}); !slices.Equal(rows, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", FormatRows(rows), FormatRows(tt.want))
			}
		})
	}
}

func TestRecreated(t *testing.T) {
	tests := []struct {
		name          string
		before, after map[string]string
		want          []string
	}{
		{name: "first observation", before: nil, after: map[string]string{"a": "1"}},
		{name: "same uids", before: map[string]string{"a": "1"}, after: map[string]string{"a": "1"}},
		{name: "made again", before: map[string]string{"b": "1", "a": "2", "c": "3"},
			after: map[string]string{"b": "9", "a": "8", "c": "3"}, want: []string{"a", "b"}},
		{name: "gone or new is not made again", before: map[string]string{"a": "1"}, after: map[string]string{"b": "2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recreated(tt.before, tt.after); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCompareScenariosListed: a scenario known under several names (a
// generated one, by its features' keys) has a difference listed under
// any one of them as no row, and marks that key seen; a name it does not
// have lists nothing.
func TestCompareScenariosListed(t *testing.T) {
	upstream, ours := recorded(t)
	step(t, &ours, "install").Conditions["Ready"] = "True/Planted"
	names := []string{"generated/hook/post-install", "generated/immutable/consent"}
	tests := []struct {
		name   string
		listed Key
		want   int
	}{
		{name: "under the first name", listed: Key{Scenario: names[0], Mode: "default", Field: "Ready"}},
		{name: "under the second name", listed: Key{Scenario: names[1], Mode: "default", Field: "Ready", Step: "install"}},
		{name: "under another name", listed: Key{Scenario: "generated/crd", Mode: "default", Field: "Ready"}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[Key]bool{}
			rows := CompareScenarios(names, upstream, ours, map[Key]string{tt.listed: "reason"}, used)
			if len(rows) != tt.want {
				t.Errorf("got %d rows, want %d:\n%s", len(rows), tt.want, FormatRows(rows))
			}
			if used[tt.listed] != (tt.want == 0) {
				t.Errorf("listed difference marked seen: %v", used[tt.listed])
			}
		})
	}
}
