package features

import (
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
	got := Defaults()
	if len(got) != len(want) {
		t.Errorf("got %d gates, want %d: %v", len(got), len(want), got)
	}
	for gate, def := range want {
		if v, ok := got[gate]; !ok || v != def {
			t.Errorf("gate %s: got (%v, present=%v), want default %v", gate, v, ok, def)
		}
	}
	got["ExternalArtifact"] = true
	if Defaults()["ExternalArtifact"] {
		t.Error("Defaults returned shared state: mutating one copy changed the next")
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
