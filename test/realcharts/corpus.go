// Package realcharts describes the corpus of real, published Helm charts
// that the parity tests install under upstream helm-controller and under
// this controller: which module and directory each comes from (pinned by
// hack/tools/charts, copied into the tool cache by `make tools`), the
// values that tell the workload simulator what the chart's programs would
// do, and what each chart covers, computed by rendering it.
//
// The repository ships no copy of these charts; a test finds them in the
// tool cache and skips, naming `make tools`, when they are not there.
package realcharts

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Chart is one chart of the corpus.
type Chart struct {
	// Name is the chart's name in the corpus (its directory in the cache),
	// and the name of the HelmRelease the tests install it as.
	Name string
	// Project is who publishes the chart.
	Project string
	// Module and Version pin where the chart comes from; Path is the
	// chart's directory inside the module.
	Module, Version, Path string
	// Sim is how the chart is installed on the simulated cluster.
	Sim Simulation
}

// ModuleVersion is module@version.
func (c Chart) ModuleVersion() string { return c.Module + "@" + c.Version }

// packageDir is this package's directory, found from this file's path so
// that any test or program finds the corpus whatever its working
// directory.
func packageDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("test", "realcharts")
	}
	return filepath.Dir(file)
}

// toolsDir is hack/tools/charts.
func toolsDir() string { return filepath.Join(packageDir(), "..", "..", "hack", "tools", "charts") }

// Corpus reads the corpus from hack/tools/charts: corpus.txt for the
// charts, go.mod for their versions, and this package's simulation table.
func Corpus() ([]Chart, error) {
	versions, err := moduleVersions(filepath.Join(toolsDir(), "go.mod"))
	if err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(toolsDir(), "corpus.txt"))
	if err != nil {
		return nil, fmt.Errorf("reading the corpus: %w", err)
	}
	defer f.Close()
	var charts []Chart
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c, err := parseLine(line, versions)
		if err != nil {
			return nil, err
		}
		charts = append(charts, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the corpus: %w", err)
	}
	return charts, nil
}

func parseLine(line string, versions map[string]string) (Chart, error) {
	fields := strings.Fields(line)
	if len(fields) != 4 {
		return Chart{}, fmt.Errorf("corpus.txt: %q: want <name> <project> <module> <path>", line)
	}
	c := Chart{Name: fields[0], Project: fields[1], Module: fields[2], Path: fields[3]}
	c.Version = versions[c.Module]
	if c.Version == "" {
		return Chart{}, fmt.Errorf("corpus.txt: chart %s: go.mod does not require %s", c.Name, c.Module)
	}
	sim, ok := simulations[c.Name]
	if !ok {
		return Chart{}, fmt.Errorf("chart %s has no entry in the simulation table (test/realcharts/simulation.go)", c.Name)
	}
	c.Sim = sim
	return c, nil
}

// moduleVersions reads the require lines of a go.mod.
func moduleVersions(gomod string) (map[string]string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return nil, fmt.Errorf("reading the corpus' versions: %w", err)
	}
	versions := map[string]string{}
	inRequire := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inRequire = true
		case line == ")":
			inRequire = false
		case inRequire || strings.HasPrefix(line, "require "):
			fields := strings.Fields(strings.TrimPrefix(line, "require "))
			if len(fields) >= 2 {
				versions[fields[0]] = fields[1]
			}
		}
	}
	return versions, nil
}

// Dir is the chart's directory in the tool cache's bin directory binDir
// (see test/cluster.ToolBinDir), or an error naming `make tools` when it
// is missing.
func (c Chart) Dir(binDir string) (string, error) {
	dir := filepath.Join(binDir, "charts", c.Name)
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return "", fmt.Errorf("chart %s is not in the tool cache (%s): run `make tools`", c.Name, dir)
	}
	return dir, nil
}
