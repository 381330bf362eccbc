package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// controllerProcess is the helm-controller binary running against the test
// cluster, as a user would run it.
type controllerProcess struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan error
	// metricsURL is where the controller serves Prometheus metrics.
	metricsURL string
}

// freeAddress returns a 127.0.0.1 address with a port nobody listens on.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startController(binary, kubeconfig, logPath string, extraArgs ...string) (*controllerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the controller log: %w", err)
	}
	metricsAddr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--watch-all-namespaces",
		"--enable-leader-election=false",
		"--metrics-addr=" + metricsAddr,
		"--health-addr=127.0.0.1:0",
		"--events-addr=",
		"--log-level=debug",
		"--requeue-dependency=2s",
		// HelmReleases of a shard belong to a test's own controller
		// (a later --watch-label-selector in extraArgs wins).
		"--watch-label-selector=!sharding.fluxcd.io/key",
	}, extraArgs...)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// KUBECONFIG rather than --kubeconfig: upstream helm-controller, which
	// some tests run, reads only the environment.
	cmd.Env = append(os.Environ(), "RUNTIME_NAMESPACE=flux-system", "KUBECONFIG="+kubeconfig)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the controller: %w", err)
	}
	p := &controllerProcess{cmd: cmd, logPath: logPath, exited: make(chan error, 1), metricsURL: "http://" + metricsAddr + "/metrics"}
	go func() {
		p.exited <- cmd.Wait()
		logFile.Close()
	}()
	return p, nil
}

// running reports an error when the process has exited.
func (p *controllerProcess) running() error {
	select {
	case err := <-p.exited:
		p.exited <- err
		return fmt.Errorf("controller exited: %v", err)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *controllerProcess) stop() error {
	if err := p.running(); err != nil {
		return err
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signalling the controller: %w", err)
	}
	select {
	case err := <-p.exited:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return fmt.Errorf("controller exited with %v", exitErr)
		}
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return errors.New("controller did not stop within 30s of SIGTERM")
	}
}

// kill sends SIGKILL, as a crash or an OOM kill would, and waits for the
// process to be gone.
func (p *controllerProcess) kill() error {
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

// dumpLog writes the last lines of the controller's log.
func (p *controllerProcess) dumpLog(w io.Writer, lines int) {
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
	fmt.Fprintf(w, "--- last %d lines of the controller log ---\n%s\n", len(tail), strings.Join(tail, "\n"))
}

// resourceUsage reads the controller's CPU time (user+system) and peak
// resident memory from /proc, for the run summary.
func (p *controllerProcess) resourceUsage() (cpu time.Duration, peakRSSKiB int64, err error) {
	pid := p.cmd.Process.Pid
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
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
