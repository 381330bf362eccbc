package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestProcState(t *testing.T) {
	tests := []struct {
		stat string
		want byte
	}{
		{stat: "123 (cluster) S 1 123 123 0 -1", want: 'S'},
		{stat: "123 (a) b) Z 1 123", want: 'Z'},
		{stat: "123 (cluster)", want: 0},
		{stat: "garbage", want: 0},
	}
	for _, tt := range tests {
		if got := procState([]byte(tt.stat)); got != tt.want {
			t.Errorf("procState(%q) = %q, want %q", tt.stat, got, tt.want)
		}
	}
}

func TestRunningIgnoresStaleAndForeignPIDs(t *testing.T) {
	st := newState(t.TempDir())
	if _, ok := st.running(); ok {
		t.Errorf("running without a pid file")
	}
	// This test process is alive but is not `serve` for the directory: a
	// recycled pid must never be taken for the cluster.
	if err := st.writePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.running(); ok {
		t.Errorf("foreign live pid taken for serve")
	}
	if err := os.WriteFile(st.path(pidFile), []byte("not a pid"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.running(); ok {
		t.Errorf("garbage pid file taken for serve")
	}
}

func TestResetWipesOnlyOwnDirectories(t *testing.T) {
	root := t.TempDir()

	fresh := newState(filepath.Join(root, "fresh"))
	if err := fresh.reset(); err != nil {
		t.Fatalf("reset of a missing dir: %v", err)
	}
	if _, err := os.Stat(fresh.path(markerFile)); err != nil {
		t.Errorf("marker not written: %v", err)
	}

	// A previous cluster's leftovers are removed.
	if err := os.WriteFile(fresh.path("kubeconfig"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fresh.reset(); err != nil {
		t.Fatalf("reset of own dir: %v", err)
	}
	if _, err := os.Stat(fresh.path("kubeconfig")); !os.IsNotExist(err) {
		t.Errorf("old kubeconfig survived reset: %v", err)
	}

	// Someone else's directory is refused and left alone.
	foreign := newState(filepath.Join(root, "foreign"))
	if err := os.MkdirAll(foreign.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(foreign.dir, "precious.txt")
	if err := os.WriteFile(precious, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := foreign.reset(); err == nil || !strings.Contains(err.Error(), "not created by this tool") {
		t.Errorf("reset of a foreign dir: err = %v", err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("foreign file touched: %v", err)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags("up", []string{"--dir", "x", "--crds", " a, ,b ", "--nodes", "2"})
	if err != nil {
		t.Fatal(err)
	}
	if o.dir != "x" || o.nodes != 2 || !slices.Equal(o.extraCRDDirs(), []string{"a", "b"}) {
		t.Errorf("parsed %+v, CRD dirs %v", o, o.extraCRDDirs())
	}
	if _, err := parseFlags("down", []string{"--nodes", "2"}); err == nil {
		t.Errorf("down accepted --nodes")
	}
	if _, err := parseFlags("status", []string{"extra"}); err == nil {
		t.Errorf("status accepted a positional argument")
	}
}
