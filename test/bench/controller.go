package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/afterhooks/helm-controller/test/cluster"
)

const (
	// clockTicksPerSecond is USER_HZ, the unit of utime and stime in
	// /proc/<pid>/stat; it is 100 on every Linux architecture Go supports.
	clockTicksPerSecond = 100
	controllerStopGrace = 30 * time.Second
	controllerUpTimeout = time.Minute
	logTailLines        = 40
)

// controllerProcess is one helm-controller binary running against a bench
// cluster, started the way the e2e tests start theirs.
type controllerProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	// metricsBase is http://<metrics address>, which also serves pprof.
	metricsBase string
	exited      chan struct{}
	exitErr     error
}

// controllerConfig is what startController needs to know.
type controllerConfig struct {
	name       string
	binary     string
	kubeconfig string
	logPath    string
	concurrent int
	// qps and burst are --kube-api-qps and --kube-api-burst; 0 leaves the
	// controller's default.
	qps, burst int
	// args follow the flags every run passes.
	args []string
}

func startController(cfg controllerConfig) (*controllerProcess, error) {
	// Reserved ports (locked, below the ephemeral range): a port taken from
	// a closed port-0 listener can be taken again before the controller binds it.
	metricsAddr, releaseMetrics, err := cluster.ReserveAddress()
	if err != nil {
		return nil, err
	}
	healthAddr, releaseHealth, err := cluster.ReserveAddress()
	if err != nil {
		releaseMetrics()
		return nil, err
	}
	release := func() { releaseMetrics(); releaseHealth() }
	logFile, err := os.Create(cfg.logPath)
	if err != nil {
		release()
		return nil, fmt.Errorf("creating the controller log: %w", err)
	}
	// Both binaries accept these flags. The log level stays at its default
	// (info): debug logging would add the logger's cost to what is measured.
	args := append([]string{
		"--watch-all-namespaces",
		"--enable-leader-election=false",
		"--metrics-addr=" + metricsAddr,
		"--health-addr=" + healthAddr,
		"--events-addr=",
		"--concurrent=" + strconv.Itoa(cfg.concurrent),
	}, cfg.args...)
	if cfg.qps > 0 {
		args = append(args, "--kube-api-qps="+strconv.Itoa(cfg.qps))
	}
	if cfg.burst > 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(cfg.burst))
	}
	cmd := exec.Command(cfg.binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// KUBECONFIG rather than --kubeconfig: upstream reads only the environment.
	cmd.Env = append(os.Environ(), "RUNTIME_NAMESPACE=flux-system", "KUBECONFIG="+cfg.kubeconfig)
	// A benchmark killed mid-run must not leave a controller behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		release()
		return nil, fmt.Errorf("starting %s: %w", cfg.binary, err)
	}
	p := &controllerProcess{
		name:        cfg.name,
		cmd:         cmd,
		logPath:     cfg.logPath,
		metricsBase: "http://" + metricsAddr,
		exited:      make(chan struct{}),
	}
	go func() {
		p.exitErr = cmd.Wait()
		logFile.Close()
		release()
		close(p.exited)
	}()
	return p, nil
}

// alive reports an error once the process has exited.
func (p *controllerProcess) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s controller exited: %v", p.name, p.exitErr)
	default:
		return nil
	}
}

// waitServing returns once the metrics endpoint answers, which both
// controllers start only after their manager is up.
func (p *controllerProcess) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, controllerUpTimeout)
	defer cancel()
	return pollEvery(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := p.alive(); err != nil {
			return false, err
		}
		_, err := fetch(ctx, p.metricsBase+"/metrics")
		return err == nil, nil
	})
}

// waitIdle returns once the controller used at most one clock tick of CPU
// over a second, so that start-up work (informer lists, caches) stays out
// of the install phase. A controller that never quiets down within the
// bound is measured anyway: that is its steady state.
func (p *controllerProcess) waitIdle(ctx context.Context) error {
	const maxWait = 15 * time.Second
	previous, err := p.cpuTime()
	if err != nil {
		return err
	}
	for range int(maxWait / time.Second) {
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
		current, err := p.cpuTime()
		if err != nil {
			return err
		}
		if current-previous <= time.Second/clockTicksPerSecond {
			return nil
		}
		previous = current
	}
	return nil
}

// cpuTime is the CPU the process used so far, user plus system, all threads.
func (p *controllerProcess) cpuTime() (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	stat, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the %s controller's CPU time: %w", p.name, err)
	}
	return parseCPUTicks(string(stat))
}

// parseCPUTicks reads utime and stime from the text of /proc/<pid>/stat.
func parseCPUTicks(stat string) (time.Duration, error) {
	// The command name is in parentheses and may hold spaces or
	// parentheses itself; fields are counted from after the last ')'.
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	fields := strings.Fields(stat[end+1:])
	// After the name: state(3) ... utime(14) stime(15), so indexes 11, 12.
	const utimeIndex, stimeIndex = 11, 12
	if len(fields) <= stimeIndex {
		return 0, fmt.Errorf("unexpected /proc stat line %q", stat)
	}
	var ticks int64
	for _, field := range []string{fields[utimeIndex], fields[stimeIndex]} {
		n, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing CPU ticks %q: %w", field, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicksPerSecond, nil
}

// peakRSSBytes is the process's high-water resident set (VmHWM).
func (p *controllerProcess) peakRSSBytes() (int64, error) {
	path := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	status, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the %s controller's memory: %w", p.name, err)
	}
	return parsePeakRSS(string(status))
}

func parsePeakRSS(status string) (int64, error) {
	for line := range strings.Lines(status) {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("unexpected VmHWM line %q", line)
		}
		kib, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing VmHWM %q: %w", line, err)
		}
		return kib * 1024, nil
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// stop sends SIGTERM and waits for the process to exit, killing it after a
// grace period. A non-zero exit is an error: both controllers exit cleanly.
func (p *controllerProcess) stop() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s controller had already exited: %v", p.name, p.exitErr)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling the %s controller: %w", p.name, err)
	}
	select {
	case <-p.exited:
		if p.exitErr != nil {
			return fmt.Errorf("%s controller exited with %w", p.name, p.exitErr)
		}
		return nil
	case <-time.After(controllerStopGrace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s controller did not stop within %s of SIGTERM", p.name, controllerStopGrace)
	}
}

// explain appends the end of the controller's log to err, which is where
// the reason for a release that never became ready usually is.
func (p *controllerProcess) explain(err error) error {
	return fmt.Errorf("%w\n--- last lines of the %s controller log (%s) ---\n%s",
		err, p.name, p.logPath, logTail(p.logPath, logTailLines))
}

func logTail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read the log: %v)", err)
	}
	defer f.Close()
	tail := make([]string, 0, lines+1)
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 1024*1024)
	for scanner.Scan() {
		tail = append(tail, scanner.Text())
		if len(tail) > lines {
			tail = tail[1:]
		}
	}
	return strings.Join(tail, "\n")
}

// fetch GETs a plain-HTTP URL on the controller and returns the body.
func fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("building a request for %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}
