package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// upstreamGateDefaults are the feature gates of upstream helm-controller
// v1.6.4 with their defaults, from its internal/features/features.go
// (ObjectLevelWorkloadIdentity from fluxcd/pkg/auth). A binary does not
// print its gates, so they are written down here.
var upstreamGateDefaults = map[string]bool{
	"CacheSecretsAndConfigMaps":      false,
	"DetectDrift":                    false,
	"CorrectDrift":                   false,
	"AllowDNSLookups":                false,
	"OOMWatch":                       false,
	"AdoptLegacyReleases":            false,
	"DisableChartDigestTracking":     false,
	"AdditiveCELDependencyCheck":     false,
	"ExternalArtifact":               false,
	"DisableConfigWatchers":          false,
	"DirectSourceFetch":              false,
	"UseHelm3Defaults":               false,
	"CancelHealthCheckOnNewRevision": false,
	"DefaultToRetryOnFailure":        false,
	"ObjectLevelWorkloadIdentity":    false,
}

// helpFlag is a flag as --help prints it.
type helpFlag struct {
	typ string
	// def is the default as docs/flags.md writes it: --help's value
	// without quotes, or the zero value of the type when --help prints
	// none.
	def string
}

var helpLine = regexp.MustCompile(`^\s+(--[a-z0-9-]+)(?: (\S+))?\s{2,}(.*)$`)
var helpDefault = regexp.MustCompile(`\(default (.*)\)$`)

// parseHelp reads the flags of a pflag --help output.
func parseHelp(t *testing.T, out string) map[string]helpFlag {
	t.Helper()
	flags := map[string]helpFlag{}
	for _, line := range strings.Split(out, "\n") {
		m := helpLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := helpFlag{typ: m[2]}
		if d := helpDefault.FindStringSubmatch(m[3]); d != nil {
			f.def = strings.Trim(d[1], `"`)
		} else {
			f.def = zeroDefault(f.typ)
		}
		flags[m[1]] = f
	}
	if len(flags) < 30 {
		t.Fatalf("found only %d flags in --help output:\n%s", len(flags), out)
	}
	return flags
}

func zeroDefault(typ string) string {
	switch typ {
	case "":
		return "false" // a bool flag prints no type
	case "stringArray":
		return "[]"
	case "string", "mapStringBool":
		return `""`
	}
	return "0"
}

func help(t *testing.T, binary string) string {
	t.Helper()
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", binary, err, out)
	}
	return string(out)
}

// upstreamBinary is upstream helm-controller from the tool cache.
func upstreamBinary(t *testing.T) string {
	t.Helper()
	binDir, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(binDir, "helm-controller-upstream")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("upstream helm-controller not found: run `make tools` first (%v)", err)
	}
	return path
}

// docRow is a row of a table in docs/flags.md: name, upstream, ours, same.
type docRow struct{ upstream, ours, same string }

func docRows(t *testing.T, nameRE string) map[string]docRow {
	t.Helper()
	docs, err := os.ReadFile(filepath.Join("docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]docRow{}
	re := regexp.MustCompile("(?m)^\\| `(" + nameRE + ")` \\| ([^|]+) \\| ([^|]+) \\| ([^|]+) \\|")
	for _, m := range re.FindAllStringSubmatch(string(docs), -1) {
		rows[m[1]] = docRow{upstream: m[2], ours: m[3], same: m[4]}
	}
	return rows
}

// TestDefaultsMatchUpstream: every flag of upstream v1.6.4 exists here with
// its type and default, every gate has upstream's default, and
// docs/flags.md says so: each row's Upstream and Ours columns are the
// binaries' (or the gates') defaults, and only equal columns read "same".
func TestDefaultsMatchUpstream(t *testing.T) {
	upstream := parseHelp(t, help(t, upstreamBinary(t)))
	ours := parseHelp(t, help(t, controllerBinary(t)))
	for name, up := range upstream {
		if got, ok := ours[name]; !ok {
			t.Errorf("upstream flag %s is missing", name)
		} else if got != up {
			t.Errorf("%s: ours %s, default %q; upstream %s, default %q", name, got.typ, got.def, up.typ, up.def)
		}
	}
	cell := func(v string) string { return "`" + v + "`" }
	flagRows := docRows(t, "--[a-z0-9-]+")
	for name, f := range ours {
		row, ok := flagRows[name]
		if !ok {
			t.Errorf("docs/flags.md has no row for %s", name)
			continue
		}
		wantUp := "not a flag"
		if up, ok := upstream[name]; ok {
			wantUp = cell(up.def)
		}
		checkRow(t, name, row, wantUp, cell(f.def))
	}
	// The gate rows' Ours column is held to the code by internal/features'
	// tests; here every upstream gate must be there with upstream's default.
	ourGates := gateDefaults(t)
	for gate, def := range upstreamGateDefaults {
		if got, ok := ourGates[gate]; !ok || got != def {
			t.Errorf("gate %s: ours %v (present %v), upstream %v", gate, got, ok, def)
		}
	}
	for gate, row := range docRows(t, gateNameRE) {
		wantUp := "not a gate"
		if up, ok := upstreamGateDefaults[gate]; ok {
			wantUp = cell(boolString(up))
		}
		checkRow(t, gate, row, wantUp, row.ours)
	}
}

// gateNameRE matches the first cell of a gate row in docs/flags.md.
const gateNameRE = "[A-Z][A-Za-z0-9]+"

// gateDefaults are the supported feature gates with their defaults, read
// from the Ours column of docs/flags.md. internal/features' tests hold
// that table to the gates the controller accepts.
func gateDefaults(t *testing.T) map[string]bool {
	t.Helper()
	gates := map[string]bool{}
	for gate, row := range docRows(t, gateNameRE) {
		switch row.ours {
		case "`true`":
			gates[gate] = true
		case "`false`":
			gates[gate] = false
		default:
			t.Fatalf("docs/flags.md gate %s: Ours column %q is neither `true` nor `false`", gate, row.ours)
		}
	}
	if len(gates) == 0 {
		t.Fatal("docs/flags.md lists no feature gates")
	}
	return gates
}

func checkRow(t *testing.T, name string, row docRow, upstream, ours string) {
	t.Helper()
	if row.upstream != upstream || row.ours != ours {
		t.Errorf("docs/flags.md %s: upstream %s, ours %s; want %s, %s", name, row.upstream, row.ours, upstream, ours)
	}
	if same := row.same == "same"; same != (upstream == ours) {
		t.Errorf("docs/flags.md %s: %q in the Same? column, with upstream %s and ours %s", name, row.same, upstream, ours)
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestStartupErrorsAsUpstream: for the same bad arguments the controller
// exits with upstream v1.6.4's exit code, and an error after the flags are
// parsed is a JSON line from the logger at level error, as upstream's.
func TestStartupErrorsAsUpstream(t *testing.T) {
	upstream, ours := upstreamBinary(t), controllerBinary(t)
	tests := []struct {
		name string
		args []string
		// logged: the error comes through the logger (not pflag's usage).
		logged bool
	}{
		{"unknown flag", []string{"--not-a-flag"}, false},
		{"unknown feature gate", []string{"--feature-gates=NoSuchGate=true"}, true},
		{"kubeconfig ServiceAccount without its gate", []string{"--default-kubeconfig-service-account=remote-sa"}, true},
		{"bad digest algorithm", []string{"--snapshot-digest-algo=md5"}, true},
		{"bad jitter", []string{"--interval-jitter-percentage=100"}, true},
		{"bad label selector", []string{"--watch-label-selector=a b c"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			upCode, upOut := exitCode(t, upstream, tt.args)
			code, out := exitCode(t, ours, tt.args)
			if code != upCode {
				t.Errorf("exit code %d, upstream's %d\nours:\n%s\nupstream:\n%s", code, upCode, out, upOut)
			}
			if !tt.logged {
				return
			}
			for who, output := range map[string]string{"ours": out, "upstream": upOut} {
				if err := lastLineIsJSONError(output); err != nil {
					t.Errorf("%s: %v\n%s", who, err, output)
				}
			}
		})
	}
}

// exitCode runs binary with args and no reachable cluster.
func exitCode(t *testing.T, binary string, args []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("running %s: %v", binary, err)
	return 0, ""
}

// lastLineIsJSONError checks that output ends with a JSON log line at
// level error that carries an error.
func lastLineIsJSONError(output string) error {
	lines := strings.Split(strings.TrimSpace(output), "\n")
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &entry); err != nil {
		return fmt.Errorf("the last line is not JSON: %v", err)
	}
	if entry["level"] != "error" || entry["error"] == nil || entry["msg"] == nil {
		return fmt.Errorf("the last line is not an error log entry: %v", entry)
	}
	return nil
}
