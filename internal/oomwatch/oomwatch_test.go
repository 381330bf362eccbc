package oomwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// cgroupFiles writes files (path relative to a new root → content) and
// returns the root.
func cgroupFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	mib         = 1 << 20
	v1Unlimited = "9223372036854771712\n" // what cgroup v1 reports without a limit
)

func TestNew(t *testing.T) {
	tests := []struct {
		name      string
		files     map[string]string
		limitPath string // relative to the root; detected when empty
		usagePath string
		mutate    func(*Options)
		wantErr   string
		wantNoLim bool
		wantLimit string // expected detected limit file, relative
		wantUsage string
	}{
		{name: "cgroup v2 detected",
			files:     map[string]string{"memory.max": "536870912\n", "memory.current": "1024\n"},
			wantLimit: "memory.max", wantUsage: "memory.current"},
		{name: "cgroup v1 detected",
			files:     map[string]string{"memory/memory.limit_in_bytes": "536870912\n", "memory/memory.usage_in_bytes": "1024\n"},
			wantLimit: "memory/memory.limit_in_bytes", wantUsage: "memory/memory.usage_in_bytes"},
		{name: "v2 preferred when both exist",
			files: map[string]string{"memory.max": "536870912", "memory.current": "1",
				"memory/memory.limit_in_bytes": "1", "memory/memory.usage_in_bytes": "1"},
			wantLimit: "memory.max", wantUsage: "memory.current"},
		{name: "explicit paths win",
			files:     map[string]string{"memory.max": "max", "memory.current": "1", "custom/limit": "1048576", "custom/usage": "10"},
			limitPath: "custom/limit", usagePath: "custom/usage", wantLimit: "custom/limit", wantUsage: "custom/usage"},
		{name: "one explicit path, the other detected",
			files:     map[string]string{"memory.max": "max", "memory.current": "1", "custom/limit": "1048576"},
			limitPath: "custom/limit", wantLimit: "custom/limit", wantUsage: "memory.current"},
		{name: "v2 without a limit",
			files:     map[string]string{"memory.max": "max\n", "memory.current": "1024\n"},
			wantNoLim: true},
		{name: "v1 without a limit",
			files:     map[string]string{"memory/memory.limit_in_bytes": v1Unlimited, "memory/memory.usage_in_bytes": "1024"},
			wantNoLim: true},
		{name: "no cgroup", files: map[string]string{}, wantErr: "no memory cgroup found"},
		{name: "missing usage file",
			files:   map[string]string{"memory.max": "536870912"},
			wantErr: "reading memory cgroup file"},
		{name: "garbage limit",
			files:   map[string]string{"memory.max": "lots", "memory.current": "1"},
			wantErr: "parsing memory limit"},
		{name: "garbage usage",
			files:   map[string]string{"memory.max": "536870912", "memory.current": "-3"},
			wantErr: "parsing memory usage"},
		{name: "threshold 0", mutate: func(o *Options) { o.ThresholdPercent = 0 }, wantErr: "between 1 and 100"},
		{name: "threshold 101", mutate: func(o *Options) { o.ThresholdPercent = 101 }, wantErr: "between 1 and 100"},
		{name: "zero interval", mutate: func(o *Options) { o.Interval = 0 }, wantErr: "interval must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := cgroupFiles(t, tt.files)
			opts := Options{CgroupRoot: root, ThresholdPercent: 95, Interval: time.Second, Log: logr.Discard()}
			if tt.mutate != nil {
				tt.mutate(&opts)
			}
			if tt.limitPath != "" {
				opts.LimitPath = filepath.Join(root, tt.limitPath)
			}
			if tt.usagePath != "" {
				opts.UsagePath = filepath.Join(root, tt.usagePath)
			}
			w, err := New(opts)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New: %v, want an error containing %q", err, tt.wantErr)
				}
				return
			case tt.wantNoLim:
				if !errors.Is(err, ErrNoLimit) {
					t.Fatalf("New: %v, want ErrNoLimit", err)
				}
				return
			case err != nil:
				t.Fatalf("New: %v", err)
			}
			if w.LimitPath() != filepath.Join(root, tt.wantLimit) || w.UsagePath() != filepath.Join(root, tt.wantUsage) {
				t.Errorf("paths %s, %s; want %s, %s", w.LimitPath(), w.UsagePath(), tt.wantLimit, tt.wantUsage)
			}
		})
	}
}

func TestNearOOM(t *testing.T) {
	tests := []struct {
		usage, limit uint64
		threshold    uint8
		want         bool
	}{
		{usage: 0, limit: 100 * mib, threshold: 95, want: false},
		{usage: 94 * mib, limit: 100 * mib, threshold: 95, want: false},
		{usage: 95*mib - 1, limit: 100 * mib, threshold: 95, want: false},
		{usage: 95 * mib, limit: 100 * mib, threshold: 95, want: true}, // reaching the threshold is enough
		{usage: 99 * mib, limit: 100 * mib, threshold: 95, want: true},
		{usage: 120 * mib, limit: 100 * mib, threshold: 95, want: true},
		{usage: 100 * mib, limit: 100 * mib, threshold: 100, want: true},
		{usage: 100*mib - 1, limit: 100 * mib, threshold: 100, want: false},
		{usage: 1 * mib, limit: 100 * mib, threshold: 1, want: true},
		// Products beyond 64 bits must not wrap around.
		{usage: 1 << 62, limit: 1<<62 + 1<<60, threshold: 95, want: false},
		{usage: 1<<63 - 1, limit: 1<<63 - 1, threshold: 100, want: true},
	}
	for _, tt := range tests {
		if got := nearOOM(tt.usage, tt.limit, tt.threshold); got != tt.want {
			t.Errorf("nearOOM(usage %d, limit %d, %d%%) = %v, want %v", tt.usage, tt.limit, tt.threshold, got, tt.want)
		}
	}
}

// The watched context stays alive below the threshold, survives unreadable
// samples, and is cancelled with ErrNearOOM once usage reaches it.
func TestWatchTriggers(t *testing.T) {
	root := cgroupFiles(t, map[string]string{"memory.max": strconv.Itoa(100 * mib), "memory.current": strconv.Itoa(50 * mib)})
	usage := filepath.Join(root, "memory.current")
	w, err := New(Options{CgroupRoot: root, ThresholdPercent: 90, Interval: 5 * time.Millisecond, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := w.Watch(context.Background())

	expectAlive := func(what string) {
		t.Helper()
		select {
		case <-ctx.Done():
			t.Fatalf("%s: context cancelled: %v", what, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond): // 20 samples
		}
	}
	expectAlive("usage at 50%")
	if err := os.WriteFile(usage, []byte("not a number"), 0o644); err != nil {
		t.Fatal(err)
	}
	expectAlive("unreadable usage")
	if err := os.WriteFile(usage, []byte(strconv.Itoa(89*mib)), 0o644); err != nil {
		t.Fatal(err)
	}
	expectAlive("usage at 89%")

	if err := os.WriteFile(usage, []byte(strconv.Itoa(90*mib)), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("context not cancelled 5s after usage reached the threshold")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ErrNearOOM) || !strings.Contains(cause.Error(), "90.0 MiB of 100.0 MiB") {
		t.Errorf("cause %v, want ErrNearOOM naming usage and limit", cause)
	}
}

// A limit raised while running (in-place pod resize) is honoured: the limit
// is read with every sample.
func TestWatchRereadsLimit(t *testing.T) {
	root := cgroupFiles(t, map[string]string{"memory.max": strconv.Itoa(100 * mib), "memory.current": strconv.Itoa(50 * mib)})
	w, err := New(Options{CgroupRoot: root, ThresholdPercent: 90, Interval: 5 * time.Millisecond, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("max"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "memory.current"), []byte(strconv.Itoa(95*mib)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := w.Watch(context.Background())
	select {
	case <-ctx.Done():
		t.Fatalf("cancelled after the limit was lifted: %v", context.Cause(ctx))
	case <-time.After(100 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte(strconv.Itoa(100*mib)), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("not cancelled after the limit came back below usage")
	}
}

// Cancelling the parent (SIGTERM) ends the watch; the cause is the
// parent's, not ErrNearOOM.
func TestWatchStopsWithParent(t *testing.T) {
	root := cgroupFiles(t, map[string]string{"memory.max": strconv.Itoa(100 * mib), "memory.current": "1"})
	w, err := New(Options{CgroupRoot: root, ThresholdPercent: 90, Interval: 5 * time.Millisecond, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	parent, cancel := context.WithCancel(context.Background())
	ctx := w.Watch(parent)
	cancel()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), ErrNearOOM) {
		t.Errorf("cause %v after the parent was cancelled", context.Cause(ctx))
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 512 * mib: "512.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
