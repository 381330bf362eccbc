package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/afterhooks/helm-controller/test/bench"
)

// Runs saved with -json come back with -from, in one table and one set of
// charts, without a cluster.
func TestFromSavedRuns(t *testing.T) {
	dir := t.TempDir()
	upstream := filepath.Join(dir, "upstream.json")
	ours := filepath.Join(dir, "ours.json")
	if err := writeJSON(upstream, []bench.Row{{Controller: bench.Upstream, Releases: 100, TimeToReady: 141 * time.Second, InstallCPU: 17 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(ours, []bench.Row{{Controller: bench.Ours, Releases: 100, TimeToReady: 26 * time.Second, InstallCPU: 8 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	f, err := parseFlags([]string{"-from", upstream + "," + ours, "-svg", filepath.Join(dir, "svg"), "-out", filepath.Join(dir, "bench.md")})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| upstream", "| ours", "141.0", "26.0"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("bench.md lacks %q:\n%s", want, md)
		}
	}
	for _, c := range bench.Charts {
		if _, err := os.Stat(filepath.Join(dir, "svg", c.File)); err != nil {
			t.Errorf("chart %s: %v", c.File, err)
		}
	}
}

func TestFromMissingOrBadFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "missing.json")} {
		f, err := parseFlags([]string{"-from", path})
		if err != nil {
			t.Fatal(err)
		}
		if err := run(context.Background(), f); err == nil || !strings.Contains(err.Error(), "reading measurements") {
			t.Errorf("-from %s: %v, want an error reading measurements", path, err)
		}
	}
}
