package main

import (
	"runtime/debug"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	info := func(version string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/afterhooks/helm-controller", Version: version}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	tests := []struct {
		name    string
		stamped string
		info    func() (*debug.BuildInfo, bool)
		want    string
	}{
		{"stamped by make", "v0.1.0-dev.0123456789ab", info("(devel)"), "v0.1.0-dev.0123456789ab"},
		{"go install of a tag", "", info("v0.2.0"), "v0.2.0"},
		{"git checkout", "", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), "v0.1.0-dev.0123456789ab"},
		{"changed checkout", "", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), "v0.1.0-dev.0123456789ab-dirty"},
		{"source without git", "", info("(devel)"), "v0.1.0-dev"},
		{"no build info", "", func() (*debug.BuildInfo, bool) { return nil, false }, "v0.1.0-dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildVersion(tt.stamped, tt.info); got != tt.want {
				t.Errorf("buildVersion = %q, want %q", got, tt.want)
			}
		})
	}
}
