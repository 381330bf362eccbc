package features

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	feathelper "github.com/fluxcd/pkg/runtime/features"
	"github.com/spf13/pflag"
)

func TestDefaults(t *testing.T) {
	// Upstream v1.6.4's gates with the defaults its
	// internal/features/features.go gives them (ObjectLevelWorkloadIdentity
	// comes from fluxcd/pkg/auth, off), plus ours, both off.
	want := map[string]bool{
		"DefaultToAfterHooks":            false,
		"RecreateImmutableResources":     false,
		"AdditiveCELDependencyCheck":     false,
		"AdoptLegacyReleases":            false,
		"AllowDNSLookups":                false,
		"CacheSecretsAndConfigMaps":      false,
		"CancelHealthCheckOnNewRevision": false,
		"CorrectDrift":                   false,
		"DefaultToRetryOnFailure":        false,
		"DetectDrift":                    false,
		"DirectSourceFetch":              false,
		"DisableChartDigestTracking":     false,
		"DisableConfigWatchers":          false,
		"ExternalArtifact":               false,
		"OOMWatch":                       false,
		"ObjectLevelWorkloadIdentity":    false,
		"UseHelm3Defaults":               false,
	}
	got := defaults()
	if len(got) != len(want) {
		t.Errorf("got %d gates, want %d: %v", len(got), len(want), got)
	}
	for gate, def := range want {
		if v, ok := got[gate]; !ok || v != def {
			t.Errorf("gate %s: got (%v, present=%v), want default %v", gate, v, ok, def)
		}
	}
	got["ExternalArtifact"] = true
	if defaults()["ExternalArtifact"] {
		t.Error("defaults returned shared state: mutating one copy changed the next")
	}
}

// The gate table of docs/flags.md is the list the root package's tests
// (and users) read: it must hold every supported gate, with its default in
// the Ours column, and no gate the controller refuses.
func TestDocsListEveryGateWithItsDefault(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z][A-Za-z0-9]+)` \\| [^|]+ \\| ([^|]+) \\|").FindAllStringSubmatch(string(docs), -1) {
		rows[m[1]] = strings.TrimSpace(m[2])
	}
	supported := defaults()
	for gate, def := range supported {
		ours, ok := rows[gate]
		if !ok {
			t.Errorf("docs/flags.md has no row for gate %s", gate)
		} else if want := fmt.Sprintf("`%v`", def); ours != want {
			t.Errorf("docs/flags.md gate %s: Ours column %s, want %s", gate, ours, want)
		}
	}
	for gate := range rows {
		if _, ok := supported[gate]; !ok {
			t.Errorf("docs/flags.md documents feature gate %s, which the controller does not accept", gate)
		}
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		arg     string
		wantErr string
		check   map[string]bool
	}{
		{name: "defaults", arg: "", check: map[string]bool{"ExternalArtifact": false, DefaultToAfterHooks: false}},
		{name: "enable ours", arg: "DefaultToAfterHooks=true", check: map[string]bool{DefaultToAfterHooks: true}},
		{name: "enable an upstream gate", arg: "ExternalArtifact=true", check: map[string]bool{"ExternalArtifact": true}},
		{name: "unknown gate", arg: "Teleport=true", wantErr: "feature-gate 'Teleport' not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gates feathelper.FeatureGates
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			gates.BindFlags(fs)
			if tt.arg != "" {
				if err := fs.Parse([]string{"--feature-gates=" + tt.arg}); err != nil {
					t.Fatal(err)
				}
			}
			err := Load(&gates)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for gate, want := range tt.check {
				if got := Enabled(gate); got != want {
					t.Errorf("Enabled(%s) = %v, want %v", gate, got, want)
				}
			}
		})
	}
	if Enabled("NoSuchGate") {
		t.Error("an unknown gate reports enabled")
	}
}

// Resolve, which the plan predicts with, must read a --feature-gates
// value exactly as the controller does (fluxcd's BindFlags, then Load).
func TestResolveAgreesWithLoad(t *testing.T) {
	args := [][]string{
		nil,
		{"--feature-gates=DefaultToRetryOnFailure=true"},
		{"--feature-gates=RecreateImmutableResources=true,UseHelm3Defaults=true"},
		{"--feature-gates=AllowDNSLookups=true", "--feature-gates=AllowDNSLookups=false,DefaultToAfterHooks=true"},
		{"--feature-gates=ExternalArtifact=true,DisableChartDigestTracking=true"},
		{"--feature-gates=Teleport=true"},
	}
	for _, arg := range args {
		t.Run(strings.Join(arg, " "), func(t *testing.T) {
			var flux feathelper.FeatureGates
			fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
			flux.BindFlags(fs)
			if err := fs.Parse(arg); err != nil {
				t.Fatal(err)
			}
			loadErr := Load(&flux)

			var cli map[string]bool
			ours := pflag.NewFlagSet("plan", pflag.ContinueOnError)
			ours.Var(GatesValue(&cli), "feature-gates", "")
			if err := ours.Parse(arg); err != nil {
				t.Fatal(err)
			}
			got, err := Resolve(cli)
			if (err == nil) != (loadErr == nil) || (err != nil && err.Error() != loadErr.Error()) {
				t.Fatalf("Resolve error %v, Load error %v", err, loadErr)
			}
			for gate, on := range got {
				if Enabled(gate) != on {
					t.Errorf("gate %s: Resolve %v, the controller %v", gate, on, Enabled(gate))
				}
			}
		})
	}
}
