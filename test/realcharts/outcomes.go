package realcharts

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// OutcomesEnv names the file TestRealChartsParity writes its outcomes to,
// when set; `make charts-outcomes` sets it to OutcomesFile.
const OutcomesEnv = "HELM_CONTROLLER_CHARTS_OUTCOMES"

// OutcomesFile is where the outcomes of the last recorded run are kept,
// for docs/charts.md.
func OutcomesFile() string { return filepath.Join(packageDir(), "outcomes.json") }

// Outcome is how one install of a chart ended: the Ready condition
// (status/reason) and how long the install took to settle.
type Outcome struct {
	Ready   string `json:"ready"`
	Install string `json:"install"`
}

// Outcomes are keyed by chart, then by mode (upstream, default,
// afterHooks).
type Outcomes map[string]map[string]Outcome

// ReadOutcomes reads the recorded outcomes; none when the file is missing.
func ReadOutcomes(file string) (Outcomes, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Outcomes{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the charts' outcomes: %w", err)
	}
	out := Outcomes{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("reading the charts' outcomes %s: %w", file, err)
	}
	return out, nil
}

// Write writes the outcomes as indented JSON, keys sorted.
func (o Outcomes) Write(file string) error {
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("writing the charts' outcomes: %w", err)
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the charts' outcomes: %w", err)
	}
	return nil
}
