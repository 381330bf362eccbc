package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/afterhooks/helm-controller/test/cluster"
)

// Controller names accepted in Options.Controllers.
const (
	// Upstream is Flux's helm-controller from the tool cache (make tools).
	Upstream = "upstream"
	// Ours is this repository's controller, built from the checkout.
	Ours = "ours"
	// OursAfterHooks is Ours with every release of the fleet installed
	// and upgraded with waitStrategy afterHooks.
	OursAfterHooks = "ours-afterhooks"
)

// isOurs is true for both fleets of this repository's controller.
func isOurs(controller string) bool { return controller == Ours || controller == OursAfterHooks }

// upstreamBinaryName is the name hack/tools/build.sh gives upstream's binary.
const upstreamBinaryName = "helm-controller-upstream"

// Defaults for Options.
const (
	DefaultConcurrent = 4
	DefaultSettle     = 10 * time.Second
	// DefaultInterval is Flux's usual interval for a HelmRelease.
	DefaultInterval = 10 * time.Minute
)

// Options configure Run.
type Options struct {
	// Releases lists fleet sizes (N); each is run with every controller.
	Releases []int
	// Controllers are Upstream and/or Ours, run in this order for each N.
	Controllers []string
	// Concurrent is both controllers' --concurrent; DefaultConcurrent when 0.
	Concurrent int
	// KubeAPIQPS and KubeAPIBurst are both controllers' --kube-api-qps and
	// --kube-api-burst; the controllers' defaults (Flux's 50 and 300) when
	// 0. Flux's advice for large fleets raises them.
	KubeAPIQPS, KubeAPIBurst int
	// Shards, when set, runs that many controllers side by side, each with
	// --watch-label-selector=sharding.fluxcd.io/key=shard<i>, and deals
	// the fleet out to them in turn; 0 runs one controller.
	Shards int
	// Settle is the pause between the install and no-op phases;
	// DefaultSettle when 0.
	Settle time.Duration
	// Interval is every release's spec.interval; DefaultInterval when 0.
	Interval time.Duration
	// Steady, when set, leaves the fleet alone this long after the restart
	// and measures the cost at rest (SteadyState); 0 skips that phase.
	Steady time.Duration
	// ProfileDir, when set, receives a CPU profile of Ours taken during the
	// install phase and a heap profile taken at the end of each run.
	ProfileDir string
	// RepoRoot is the checkout Ours is built from and whose CRDs are
	// installed; the module of the working directory when empty.
	RepoRoot string
	// ChartDir is the podinfo chart; the repository's copy
	// when empty.
	ChartDir string
	// ToolBinDir holds the cluster binaries and upstream's controller;
	// found as test/cluster finds it when empty.
	ToolBinDir string
	// Progress receives a line per step; discarded when nil.
	Progress io.Writer
}

func (o Options) withDefaults() (Options, error) {
	if len(o.Releases) == 0 {
		return o, errors.New("no fleet size given")
	}
	for _, n := range o.Releases {
		if n < 1 {
			return o, fmt.Errorf("fleet size must be at least 1, got %d", n)
		}
	}
	if len(o.Controllers) == 0 {
		return o, errors.New("no controller given")
	}
	for _, name := range o.Controllers {
		if name != Upstream && !isOurs(name) {
			return o, fmt.Errorf("unknown controller %q (want %s, %s or %s)", name, Upstream, Ours, OursAfterHooks)
		}
	}
	if o.Shards < 0 {
		return o, fmt.Errorf("shards must be 0 or more, got %d", o.Shards)
	}
	if o.Concurrent == 0 {
		o.Concurrent = DefaultConcurrent
	}
	if o.Settle == 0 {
		o.Settle = DefaultSettle
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.Interval < 0 || o.Steady < 0 {
		return o, fmt.Errorf("interval and steady window must not be negative, got %s and %s", o.Interval, o.Steady)
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.RepoRoot == "" {
		root, err := moduleRoot()
		if err != nil {
			return o, err
		}
		o.RepoRoot = root
	}
	if o.ChartDir == "" {
		o.ChartDir = filepath.Join(o.RepoRoot, "test", "e2e", "framework", "charts", "podinfo")
	}
	if _, err := os.Stat(filepath.Join(o.ChartDir, "Chart.yaml")); err != nil {
		return o, fmt.Errorf("podinfo chart not found: %w", err)
	}
	return o, nil
}

// Row is what one run measured: one controller reconciling a fleet of N.
type Row struct {
	Controller string
	Releases   int

	// Install phase: from the first create until all are Ready.
	TimeToReady        time.Duration
	InstallCPU         time.Duration
	APIRequests        float64 // growth of apiserver_request_total, all clients
	ControllerRequests float64 // growth of the controller's rest_client_requests_total

	// No-op phase: from the reconcile requests until all were handled.
	NoopCPU time.Duration

	// Downloads are known only for Ours; see the package documentation.
	DownloadsCounted bool
	InstallDownloads float64
	NoopDownloads    float64

	PeakRSSBytes int64

	// Shards is how many controllers shared the fleet (0: one, unsharded);
	// CPU, requests and peak RSS are then their sums.
	Shards int

	// Restart phase: the controllers stopped (SIGTERM) and started again
	// with the fleet deployed, until each had reconciled every release
	// once. RestartCPU counts the new processes from their start.
	RestartTime time.Duration
	RestartCPU  time.Duration
	// NewRevisions is how many Helm revisions appeared after the install
	// phase: through the no-op phase and the restart. It should be 0.
	NewRevisions int

	// Steady is the cost at rest after the restart, when Options.Steady
	// asked for it.
	Steady SteadyState `json:",omitzero"`
}

// Run benchmarks every controller at every fleet size, one run at a time,
// each on a fresh cluster. On error it returns the rows measured so far.
func Run(ctx context.Context, opts Options) ([]Row, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	buildDir, err := os.MkdirTemp("", "helm-controller-bench-build-*")
	if err != nil {
		return nil, fmt.Errorf("creating the build directory: %w", err)
	}
	defer os.RemoveAll(buildDir)
	binaries, err := controllerBinaries(ctx, opts, buildDir)
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, n := range opts.Releases {
		for _, name := range opts.Controllers {
			row, err := runOnce(ctx, opts, runSpec{controller: name, binary: binaries[name], releases: n, shards: opts.Shards})
			if err != nil {
				return rows, fmt.Errorf("%s controller with %d releases: %w", name, n, err)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// controllerBinaries finds upstream's binary and builds ours, as asked.
func controllerBinaries(ctx context.Context, opts Options, buildDir string) (map[string]string, error) {
	binaries := map[string]string{}
	if slices.Contains(opts.Controllers, Upstream) {
		path, err := upstreamBinary(opts.ToolBinDir)
		if err != nil {
			return nil, err
		}
		binaries[Upstream] = path
	}
	if slices.ContainsFunc(opts.Controllers, isOurs) {
		path := filepath.Join(buildDir, "helm-controller")
		began := time.Now()
		if err := buildOurs(ctx, opts.RepoRoot, path); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Progress, "bench: built %s in %s\n", Ours, time.Since(began).Round(100*time.Millisecond))
		binaries[Ours], binaries[OursAfterHooks] = path, path
	}
	return binaries, nil
}

func upstreamBinary(toolBinDir string) (string, error) {
	dir, err := cluster.ToolBinDir(toolBinDir)
	if err != nil {
		return "", fmt.Errorf("locating the tool cache: %w", err)
	}
	path, err := filepath.EvalSymlinks(filepath.Join(dir, upstreamBinaryName))
	if err != nil {
		return "", fmt.Errorf("%s is missing from the tool cache; run 'make tools': %w", upstreamBinaryName, err)
	}
	return path, nil
}

// buildOurs builds the controller as the image ships it (hack/release)
// and as upstream's tool binary is built: static, stripped, trimmed.
// A binary with symbols and cgo maps twice the pages, which peak RSS
// counts.
func buildOurs(ctx context.Context, repoRoot, output string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", output, ".")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("building the controller in %s: %w\n%s", repoRoot, err, out)
	}
	return nil
}

// moduleRoot is the directory of the go.mod governing the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module; run from the helm-controller checkout or set Options.RepoRoot")
	}
	return filepath.Dir(gomod), nil
}
