package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ShardLabel is the label that assigns a HelmRelease to a shard. The shared
// controller leaves labelled HelmReleases alone, so a test that runs a
// controller of its own labels its releases with its shard.
const ShardLabel = "sharding.fluxcd.io/key"

// LeaseNamespace is the RUNTIME_NAMESPACE of every controller started here,
// where leader election keeps its Lease.
const LeaseNamespace = "flux-system"

// ControllerOptions say which controller to run and how.
type ControllerOptions struct {
	// Binary is the controller to run: ours, or upstream's for takeover
	// tests.
	Binary string
	// Kubeconfig is the cluster the controller talks to.
	Kubeconfig string
	// Shard, when set, limits the controller to the HelmReleases
	// labelled with it; when empty it takes every unlabelled one.
	Shard string
	// LeaderElection turns leader election on, as in a deployment.
	LeaderElection bool
	// Args are extra flags; a later flag wins over the defaults.
	Args []string
	// LogDir holds one log file per process started.
	LogDir string
	// Env is extra environment for the process.
	Env []string
}

// Controller is one helm-controller deployment as a test sees it: a
// process that can be killed, stopped and started again with the same
// options, keeping the log of every process it ran.
type Controller struct {
	opts ControllerOptions

	mu    sync.Mutex
	procs []*process
	// mark is the index of the first process of the current step, for
	// DumpLogs.
	mark int
}

// process is one run of the controller binary.
type process struct {
	cmd        *exec.Cmd
	logPath    string
	metricsURL string
	exited     chan error
}

// StartController starts the first process of a controller.
func StartController(opts ControllerOptions) (*Controller, error) {
	if opts.Binary == "" || opts.Kubeconfig == "" || opts.LogDir == "" {
		return nil, errors.New("a controller needs a binary, a kubeconfig and a log directory")
	}
	c := &Controller{opts: opts}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// Options returns the options the controller runs with.
func (c *Controller) Options() ControllerOptions {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opts
}

// Configure changes the options of the processes started from now on, for
// a test that swaps the binary (going back to upstream) or drops a flag
// between two runs. The shard stays what it was.
func (c *Controller) Configure(change func(*ControllerOptions)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	shard := c.opts.Shard
	change(&c.opts)
	c.opts.Shard = shard
}

// Start starts a new process with the controller's options. The previous
// one must be gone, unless leader election is on and the test wants two
// replicas; use StartReplica for that.
func (c *Controller) Start() error {
	if err := c.Running(); err == nil && len(c.procs) > 0 {
		return errors.New("the controller is still running")
	}
	_, err := c.StartReplica()
	return err
}

// StartReplica starts one more process beside those running and returns
// its index, for leader-election tests.
func (c *Controller) StartReplica() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name := "controller"
	if c.opts.Shard != "" {
		name = c.opts.Shard
	}
	logPath := filepath.Join(c.opts.LogDir, fmt.Sprintf("%s-%d.log", name, len(c.procs)+1))
	p, err := startProcess(c.opts, logPath)
	if err != nil {
		return 0, err
	}
	c.procs = append(c.procs, p)
	recordStart(c.opts.Shard, c.opts.Binary)
	return len(c.procs) - 1, nil
}

func startProcess(opts ControllerOptions, logPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the controller log: %w", err)
	}
	metricsAddr, releaseAddr, err := ReserveAddress()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	selector := "!" + ShardLabel
	if opts.Shard != "" {
		selector = ShardLabel + "=" + opts.Shard
	}
	args := append([]string{
		"--watch-all-namespaces",
		"--enable-leader-election=" + strconv.FormatBool(opts.LeaderElection),
		"--metrics-addr=" + metricsAddr,
		"--health-addr=127.0.0.1:0",
		"--events-addr=",
		"--log-level=debug",
		"--requeue-dependency=2s",
		"--watch-label-selector=" + selector,
	}, opts.Args...)
	cmd := exec.Command(opts.Binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// KUBECONFIG rather than --kubeconfig: upstream helm-controller reads
	// only the environment.
	cmd.Env = append(append(os.Environ(), "RUNTIME_NAMESPACE="+LeaseNamespace, "KUBECONFIG="+opts.Kubeconfig), opts.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		releaseAddr()
		return nil, fmt.Errorf("starting the controller: %w", err)
	}
	p := &process{cmd: cmd, logPath: logPath, exited: make(chan error, 1), metricsURL: "http://" + metricsAddr + "/metrics"}
	go func() {
		err := cmd.Wait()
		logFile.Close()
		releaseAddr()
		p.exited <- err
	}()
	return p, nil
}

// current is the newest process.
func (c *Controller) current() *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.procs) == 0 {
		return nil
	}
	return c.procs[len(c.procs)-1]
}

// replica returns process i.
func (c *Controller) replica(i int) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i]
}

// Running returns an error when the newest process has exited.
func (c *Controller) Running() error {
	p := c.current()
	if p == nil {
		return errors.New("no controller process started")
	}
	return p.running()
}

// ReplicaRunning is Running for process i.
func (c *Controller) ReplicaRunning(i int) error { return c.replica(i).running() }

// Kill sends SIGKILL to the newest process, as a crash or an OOM kill
// would, and waits until it is gone.
func (c *Controller) Kill() error { return c.current().kill() }

// Stop sends SIGTERM to the newest process and waits for a clean exit.
func (c *Controller) Stop() error { return c.current().stop() }

// StopReplica is Stop for process i.
func (c *Controller) StopReplica(i int) error { return c.replica(i).stop() }

// Signal sends sig to the newest process, for a test that triggers a
// shutdown itself and times it with WaitExit.
func (c *Controller) Signal(sig os.Signal) error {
	p := c.current()
	if err := p.running(); err != nil {
		return err
	}
	return p.cmd.Process.Signal(sig)
}

// WaitExit waits up to timeout for the newest process to exit and returns
// nil when it exited cleanly (status 0).
func (c *Controller) WaitExit(timeout time.Duration) error {
	p := c.current()
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			return fmt.Errorf("controller exited with %v", err)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("controller still running %s later", timeout)
	}
}

// StopAll stops every process still running.
func (c *Controller) StopAll() error {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p.running() == nil {
			errs = append(errs, p.stop())
		}
	}
	return errors.Join(errs...)
}

// MetricsURL is where the newest process serves Prometheus metrics.
func (c *Controller) MetricsURL() string { return c.current().metricsURL }

// ReplicaMetricsURL is MetricsURL for process i.
func (c *Controller) ReplicaMetricsURL(i int) string { return c.replica(i).metricsURL }

// LogPath is the log file of the newest process.
func (c *Controller) LogPath() string { return c.current().logPath }

// Log returns the logs of every process, oldest first.
func (c *Controller) Log() (string, error) {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		data, err := os.ReadFile(p.logPath)
		if err != nil {
			return "", fmt.Errorf("reading the controller log: %w", err)
		}
		b.Write(data)
	}
	return b.String(), nil
}

// Mark starts a new step: DumpLogs shows only processes from here on (and
// the one running now).
func (c *Controller) Mark() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mark = max(len(c.procs)-1, 0)
}

// DumpLogs writes the last lines of each process's log since Mark.
func (c *Controller) DumpLogs(w io.Writer, lines int) {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs[c.mark:]...)
	c.mu.Unlock()
	for _, p := range procs {
		p.dumpLog(w, lines)
	}
}

// ResourceUsage reads the newest process's CPU time (user+system) and peak
// resident memory from /proc.
func (c *Controller) ResourceUsage() (cpu time.Duration, peakRSSKiB int64, err error) {
	return c.current().resourceUsage()
}

func (p *process) running() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("controller exited: %v", err)
	default:
		return nil
	}
}

func (p *process) stop() error {
	if err := p.running(); err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling the controller: %w", err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
				// Stopped before it installed its signal handler (a
				// run with no tests): SIGTERM's default action.
				return nil
			}
			return fmt.Errorf("controller exited with %v", exitErr)
		}
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return errors.New("controller did not stop within 30s of SIGTERM")
	}
}

func (p *process) kill() error {
	if err := p.running(); err != nil {
		return err
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing the controller: %w", err)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("controller still running 10s after SIGKILL")
	}
}

func (p *process) dumpLog(w io.Writer, lines int) {
	f, err := os.Open(p.logPath)
	if err != nil {
		fmt.Fprintf(w, "cannot read controller log: %v\n", err)
		return
	}
	defer f.Close()
	var tail []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		tail = append(tail, sc.Text())
		if len(tail) > lines {
			tail = tail[1:]
		}
	}
	fmt.Fprintf(w, "--- last %d lines of %s ---\n%s\n", len(tail), filepath.Base(p.logPath), strings.Join(tail, "\n"))
}

func (p *process) resourceUsage() (cpu time.Duration, peakRSSKiB int64, err error) {
	pid := p.cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(fields) < 13 {
		return 0, 0, fmt.Errorf("unexpected /proc/%d/stat: %s", pid, stat)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	cpu = time.Duration(utime+stime) * time.Second / ticksPerSecond

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return cpu, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			peakRSSKiB, _ = strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
		}
	}
	return cpu, peakRSSKiB, nil
}

// Replicas is how many processes the controller started, running or not.
func (c *Controller) Replicas() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.procs)
}
