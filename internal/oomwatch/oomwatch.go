// Package oomwatch stops the controller gracefully before the kernel's OOM
// killer does it abruptly.
//
// A SIGKILL in the middle of a Helm action leaves the release pending
// (pending-install, pending-upgrade, pending-rollback) until a controller
// unlocks it. The watcher samples the memory cgroup of the process and, once
// usage reaches a threshold of the limit, cancels the context the manager
// runs under: exactly what SIGTERM does. The manager then stops handing out
// work and in-flight reconciles see their context cancelled, so Helm marks
// the releases it was changing failed instead of leaving them pending (see
// docs/operations.md).
package oomwatch

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
)

// DefaultCgroupRoot is where a container sees its own memory cgroup.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// The memory files of the two cgroup versions, relative to the root.
const (
	v2LimitFile   = "memory.max"
	v2UsageFile   = "memory.current"
	v1LimitFile   = "memory/memory.limit_in_bytes"
	v1UsageFile   = "memory/memory.usage_in_bytes"
	v2NoLimitText = "max"
)

// v1NoLimit is the smallest cgroup v1 limit that means "unlimited": the
// kernel reports the largest page-aligned int64 (9223372036854771712), and
// no real limit comes anywhere near 2^62 bytes.
const v1NoLimit = uint64(1) << 62

// ErrNearOOM is the cause of the cancellation of the watched context.
var ErrNearOOM = errors.New("memory usage reached the OOM watch threshold")

// ErrNoLimit is returned by New when the cgroup sets no memory limit: the
// OOM killer then never acts on the cgroup alone, so there is nothing to
// watch for.
var ErrNoLimit = errors.New("the memory cgroup sets no limit")

// Options configure a Watcher. Zero paths are detected under CgroupRoot.
type Options struct {
	// LimitPath is the file holding the memory limit
	// (--oom-watch-max-memory-path).
	LimitPath string
	// UsagePath is the file holding the current memory usage
	// (--oom-watch-current-memory-path).
	UsagePath string
	// ThresholdPercent of the limit at which the watcher triggers, 1 to 100
	// (--oom-watch-memory-threshold).
	ThresholdPercent uint8
	// Interval between samples (--oom-watch-interval).
	Interval time.Duration
	// CgroupRoot is where paths are detected; DefaultCgroupRoot when empty.
	CgroupRoot string
	Log        logr.Logger
}

// Watcher samples memory usage against the limit.
type Watcher struct {
	limitPath string
	usagePath string
	threshold uint8
	interval  time.Duration
	log       logr.Logger
}

// New checks the options, detects the cgroup files that were not given and
// reads them once. It returns ErrNoLimit (wrapped) when there is no limit.
func New(opts Options) (*Watcher, error) {
	if opts.ThresholdPercent < 1 || opts.ThresholdPercent > 100 {
		return nil, fmt.Errorf("memory threshold must be between 1 and 100 percent, got %d", opts.ThresholdPercent)
	}
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("sampling interval must be positive, got %s", opts.Interval)
	}
	root := opts.CgroupRoot
	if root == "" {
		root = DefaultCgroupRoot
	}
	limitPath, usagePath, err := resolvePaths(root, opts.LimitPath, opts.UsagePath)
	if err != nil {
		return nil, err
	}
	w := &Watcher{limitPath: limitPath, usagePath: usagePath, threshold: opts.ThresholdPercent,
		interval: opts.Interval, log: opts.Log}
	s, err := w.sample()
	if err != nil {
		return nil, err
	}
	if s.unlimited {
		return nil, fmt.Errorf("%s: %w", limitPath, ErrNoLimit)
	}
	return w, nil
}

// LimitPath and UsagePath name the files the watcher reads.
func (w *Watcher) LimitPath() string { return w.limitPath }
func (w *Watcher) UsagePath() string { return w.usagePath }

// resolvePaths fills in the files that were not given: cgroup v2's when
// root has memory.max, else cgroup v1's memory controller.
func resolvePaths(root, limitPath, usagePath string) (string, string, error) {
	if limitPath != "" && usagePath != "" {
		return limitPath, usagePath, nil
	}
	var detected [2]string
	switch {
	case exists(filepath.Join(root, v2LimitFile)):
		detected = [2]string{filepath.Join(root, v2LimitFile), filepath.Join(root, v2UsageFile)}
	case exists(filepath.Join(root, v1LimitFile)):
		detected = [2]string{filepath.Join(root, v1LimitFile), filepath.Join(root, v1UsageFile)}
	default:
		return "", "", fmt.Errorf("no memory cgroup found under %s (neither %s nor %s); set the paths explicitly",
			root, v2LimitFile, v1LimitFile)
	}
	if limitPath == "" {
		limitPath = detected[0]
	}
	if usagePath == "" {
		usagePath = detected[1]
	}
	return limitPath, usagePath, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// sample is one reading of the cgroup files.
type sample struct {
	usage, limit uint64
	unlimited    bool
}

// sample reads usage and limit. The limit is read every time because
// in-place pod resizing can change it while the process runs.
func (w *Watcher) sample() (sample, error) {
	limitText, err := readTrimmed(w.limitPath)
	if err != nil {
		return sample{}, err
	}
	usageText, err := readTrimmed(w.usagePath)
	if err != nil {
		return sample{}, err
	}
	usage, err := strconv.ParseUint(usageText, 10, 64)
	if err != nil {
		return sample{}, fmt.Errorf("parsing memory usage in %s: %w", w.usagePath, err)
	}
	if limitText == v2NoLimitText {
		return sample{usage: usage, unlimited: true}, nil
	}
	limit, err := strconv.ParseUint(limitText, 10, 64)
	if err != nil {
		return sample{}, fmt.Errorf("parsing memory limit in %s: %w", w.limitPath, err)
	}
	// A zero limit cannot hold a running process; it only comes from a
	// file that is not a memory limit, and must not trigger a shutdown.
	return sample{usage: usage, limit: limit, unlimited: limit == 0 || limit >= v1NoLimit}, nil
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading memory cgroup file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// nearOOM tells whether usage has reached thresholdPercent of limit. The
// products are computed in 128 bits, so no limit can overflow them.
func nearOOM(usage, limit uint64, thresholdPercent uint8) bool {
	uHi, uLo := bits.Mul64(usage, 100)
	lHi, lLo := bits.Mul64(limit, uint64(thresholdPercent))
	return uHi > lHi || (uHi == lHi && uLo >= lLo)
}

// Watch returns a context derived from ctx that is cancelled, with cause
// ErrNearOOM, when memory usage reaches the threshold. Sampling stops when
// ctx ends or the threshold was reached. A failed sample is logged and
// skipped: a transient read error must not stop the controller.
func (w *Watcher) Watch(ctx context.Context) context.Context {
	watched, cancel := context.WithCancelCause(ctx)
	go w.watch(ctx, cancel)
	return watched
}

func (w *Watcher) watch(ctx context.Context, cancel context.CancelCauseFunc) {
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		s, err := w.sample()
		switch {
		case err != nil:
			w.log.Error(err, "skipping a memory sample")
		case s.unlimited:
			// The limit was lifted while running; keep watching in case
			// it comes back.
			w.log.V(2).Info("memory cgroup has no limit", "usage", s.usage)
		case nearOOM(s.usage, s.limit, w.threshold):
			w.log.Info("memory usage reached the threshold: shutting down gracefully before the OOM killer acts",
				"usage", formatBytes(s.usage), "limit", formatBytes(s.limit), "thresholdPercent", w.threshold)
			cancel(fmt.Errorf("%w (%s of %s, threshold %d%%)", ErrNearOOM,
				formatBytes(s.usage), formatBytes(s.limit), w.threshold))
			return
		default:
			w.log.V(2).Info("memory usage", "usage", formatBytes(s.usage), "limit", formatBytes(s.limit))
		}
	}
}

// formatBytes renders a byte count for people: 512.0 MiB.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	value, exp := float64(n)/unit, 0
	for value >= unit && exp < 5 {
		value /= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", value, "KMGTPE"[exp])
}
