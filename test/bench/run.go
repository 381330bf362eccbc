package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// runSpec is one cell of the benchmark matrix.
type runSpec struct {
	controller string
	binary     string
	releases   int
	// shards is the number of controllers sharing the fleet by
	// sharding.fluxcd.io/key; 0 runs one controller without a selector.
	shards int
}

// run is the state of one run while it is measured.
type run struct {
	runSpec
	opts     Options
	env      *environment
	ctls     controllers
	configs  []controllerConfig
	progress io.Writer
	row      Row
}

// runOnce measures one controller (or its shards) with one fleet size on
// a fresh cluster and stops everything it started, whatever happens.
func runOnce(ctx context.Context, opts Options, spec runSpec) (row Row, err error) {
	progress := prefixWriter{w: opts.Progress, prefix: fmt.Sprintf("bench: %s N=%d: ", controllerLabel(spec.controller, spec.shards), spec.releases)}
	workDir, err := os.MkdirTemp("", "helm-controller-bench-*")
	if err != nil {
		return row, fmt.Errorf("creating the work directory: %w", err)
	}
	defer os.RemoveAll(workDir)

	env, err := startEnvironment(ctx, opts, progress)
	if err != nil {
		return row, err
	}
	if spec.controller == OursAfterHooks {
		env.waitStrategy = v2.AfterHooks
	}
	env.shards = spec.shards
	defer func() { err = errors.Join(err, env.stop()) }()

	r := &run{runSpec: spec, opts: opts, env: env, progress: progress,
		configs: controllerConfigs(spec, opts, env.cluster.Kubeconfig(), workDir),
		row:     Row{Controller: spec.controller, Releases: spec.releases, Shards: spec.shards}}
	if r.ctls, err = startControllers(r.configs); err != nil {
		return row, err
	}
	measureErr := r.measure(ctx)
	stopErr := r.ctls.stop()
	// The logs are read before the deferred clean-up removes the work directory.
	if err := errors.Join(measureErr, stopErr); err != nil {
		return row, r.ctls.explain(err)
	}
	return r.row, nil
}

// controllerConfigs is one controller, or one per shard, each watching
// only its shard's releases.
func controllerConfigs(spec runSpec, opts Options, kubeconfig, workDir string) []controllerConfig {
	base := controllerConfig{name: spec.controller, binary: spec.binary, kubeconfig: kubeconfig,
		logPath: filepath.Join(workDir, "controller.log"), concurrent: opts.Concurrent,
		qps: opts.KubeAPIQPS, burst: opts.KubeAPIBurst}
	if spec.shards == 0 {
		return []controllerConfig{base}
	}
	configs := make([]controllerConfig, spec.shards)
	for i := range configs {
		c := base
		c.name = fmt.Sprintf("%s %s", spec.controller, shardKey(i))
		c.logPath = filepath.Join(workDir, fmt.Sprintf("controller-%s.log", shardKey(i)))
		c.args = []string{"--watch-label-selector=" + shardLabel + "=" + shardKey(i)}
		configs[i] = c
	}
	return configs
}

// startControllers starts every process; on error it stops those started.
func startControllers(configs []controllerConfig) (controllers, error) {
	var ctls controllers
	for _, cfg := range configs {
		ctl, err := startController(cfg)
		if err != nil {
			return nil, errors.Join(err, ctls.stop())
		}
		ctls = append(ctls, ctl)
	}
	return ctls, nil
}

func (r *run) measure(ctx context.Context) error {
	if err := r.ctls.waitServing(ctx); err != nil {
		return err
	}
	if err := r.ctls.waitIdle(ctx); err != nil {
		return err
	}
	profile, err := r.installPhase(ctx)
	if err != nil {
		return err
	}
	if err := r.settle(ctx); err != nil {
		return err
	}
	// The profile may outlast a short install; it must not reach into
	// the no-op phase.
	if err := profile.wait(); err != nil {
		return err
	}
	if err := r.noopPhase(ctx); err != nil {
		return err
	}
	if err := r.checkShards(ctx); err != nil {
		return err
	}
	if r.row.PeakRSSBytes, err = r.ctls.peakRSSBytes(); err != nil {
		return err
	}
	if err := r.saveHeapProfile(ctx, "heap"); err != nil {
		return err
	}
	if err := r.restartPhase(ctx); err != nil {
		return err
	}
	return r.steadyPhase(ctx)
}

// installTimeout grows with the fleet: a few seconds per release on a
// small machine, never less than five minutes.
func installTimeout(n int) time.Duration {
	return max(5*time.Minute, time.Duration(n)*3*time.Second)
}

// noopTimeout: a reconcile with nothing to do is faster than an install.
func noopTimeout(n int) time.Duration {
	return max(3*time.Minute, time.Duration(n)*2*time.Second)
}

// installPhase creates the fleet and waits until all of it is Ready. It
// returns the CPU profile started with it, still running if the phase was
// shorter than the profile.
func (r *run) installPhase(ctx context.Context) (*pendingProfile, error) {
	before, err := r.begin(ctx)
	if err != nil {
		return nil, err
	}
	kindsBefore, err := r.env.apiServerRequestsByKind(ctx)
	if err != nil {
		return nil, err
	}
	profile := joinProfiles(r.startCPUProfile(ctx, cpuProfileSeconds, "cpu"),
		r.startAPIServerProfile(ctx, cpuProfileSeconds, "apiserver-cpu"))
	began := time.Now()
	if err := r.env.createFleet(ctx, r.releases); err != nil {
		return nil, err
	}
	err = r.env.waitFleet(ctx, fleetWait{
		what:     "install: Ready",
		releases: r.releases,
		timeout:  installTimeout(r.releases),
		check:    readyForGeneration,
		alive:    r.ctls.alive,
		progress: r.progress,
	})
	if err != nil {
		return nil, err
	}
	r.row.TimeToReady = time.Since(began)
	after, err := r.end(ctx)
	if err != nil {
		return nil, err
	}
	r.row.InstallCPU = after.cpu - before.cpu
	r.row.APIRequests = after.apiRequests - before.apiRequests
	r.row.ControllerRequests = after.controllerRequests - before.controllerRequests
	r.row.InstallDownloads = after.downloads - before.downloads
	kindsAfter, err := r.env.apiServerRequestsByKind(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(r.progress, "install: API requests per release, the most frequent (all clients): %s\n",
		topGrowth(kindsBefore, kindsAfter, r.releases, 8))
	fmt.Fprintf(r.progress, "install: all %d Ready in %s, controller CPU %s\n",
		r.releases, r.row.TimeToReady.Round(100*time.Millisecond), r.row.InstallCPU)
	return profile, nil
}

// settle leaves time for what follows the installs (status writes, events,
// requeues) to finish, so the no-op phase measures only no-op reconciles.
func (r *run) settle(ctx context.Context) error {
	if err := sleep(ctx, r.opts.Settle); err != nil {
		return err
	}
	return r.ctls.alive()
}

// noopPhase asks every release for a reconcile that has nothing to do and
// waits until every one was handled.
func (r *run) noopPhase(ctx context.Context) error {
	// With the heap profile saved after the phase, this one gives what the
	// no-op reconciles allocated (go tool pprof -sample_index=alloc_space
	// -base <this> <that>).
	if err := r.saveHeapProfile(ctx, "heap-before-noop"); err != nil {
		return err
	}
	before, err := r.begin(ctx)
	if err != nil {
		return err
	}
	token := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	profile := r.startCPUProfile(ctx, noopProfileSeconds(r.releases), "noop-cpu")
	began := time.Now()
	if err := r.env.requestReconcile(ctx, r.releases, token); err != nil {
		return err
	}
	err = r.env.waitFleet(ctx, fleetWait{
		what:     "no-op: reconcile handled",
		releases: r.releases,
		timeout:  noopTimeout(r.releases),
		check:    handledAndReady(token),
		alive:    r.ctls.alive,
		progress: r.progress,
	})
	if err != nil {
		return err
	}
	after, err := r.end(ctx)
	if err != nil {
		return err
	}
	r.row.NoopCPU = after.cpu - before.cpu
	r.row.NoopDownloads = after.downloads - before.downloads
	r.row.DownloadsCounted = isOurs(r.controller)
	fmt.Fprintf(r.progress, "no-op: all %d handled in %s, controller CPU %s\n",
		r.releases, time.Since(began).Round(100*time.Millisecond), r.row.NoopCPU)
	return profile.wait()
}

// counters are the cumulative readings a phase is measured between.
type counters struct {
	cpu                time.Duration
	apiRequests        float64
	controllerRequests float64
	// downloads stays 0 for upstream, which does not count them.
	downloads float64
}

// A phase's window is [begin, end]. The CPU time is read last at the
// beginning and first at the end, so the scrapes of /metrics that take the
// other readings (the controller renders one series per release, which at
// thousands of releases costs it tens of milliseconds) fall outside the
// window: it holds the controller's own work only.
func (r *run) begin(ctx context.Context) (counters, error) {
	c, err := r.scrape(ctx)
	if err != nil {
		return c, err
	}
	c.cpu, err = r.ctls.cpuTime()
	return c, err
}

func (r *run) end(ctx context.Context) (counters, error) {
	cpu, err := r.ctls.cpuTime()
	if err != nil {
		return counters{}, err
	}
	c, err := r.scrape(ctx)
	c.cpu = cpu
	return c, err
}

// scrape reads every counter but the CPU time.
func (r *run) scrape(ctx context.Context) (counters, error) {
	var c counters
	var err error
	if c.apiRequests, err = r.env.apiServerRequestCount(ctx); err != nil {
		return c, err
	}
	if c.controllerRequests, err = r.ctls.metric(ctx, clientRequests); err != nil {
		return c, err
	}
	if isOurs(r.controller) {
		if c.downloads, err = r.ctls.metric(ctx, oursChartDownloads); err != nil {
			return c, err
		}
	}
	return c, nil
}

// prefixWriter starts every write with a prefix. Progress lines are
// written one per call, and each goes out in a single write so that a
// line-oriented destination (a test log) keeps prefix and line together.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	line := make([]byte, 0, len(p.prefix)+len(b))
	line = append(append(line, p.prefix...), b...)
	if _, err := p.w.Write(line); err != nil {
		return 0, err
	}
	return len(b), nil
}
