package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// stopGrace is how long a component may take to exit after SIGTERM. The
	// cluster's data is thrown away, so there is nothing worth waiting for.
	stopGrace = 5 * time.Second
	// killWait is how long a SIGKILLed process may take to be reaped.
	killWait = 10 * time.Second
	// tailLines is how much of a component's log an error quotes.
	tailLines = 25
	// tailBytes bounds how much of a log file is read to find those lines.
	tailBytes = 16 << 10
)

// process is one running component.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	// err is how the process ended; read it only after done is closed.
	err error
	// killed records that stop had to use SIGKILL.
	killed bool
}

// startProcess runs bin with args, its output going to dir/logs/<name>.log.
// onExit runs (in its own goroutine) when the process ends, however it ends,
// before the process counts as exited (stop returns); it must not wait for
// the process itself.
func startProcess(name, bin, logDir string, args, env []string, onExit func(*process)) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	// The child gets its own copy of the descriptor; ours is not needed.
	defer logFile.Close()

	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = env
	cmd.SysProcAttr = childAttrs()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		// onExit first: whoever stops the process on purpose (a restart)
		// unmarks it once stop returns, so the exit must have been judged
		// by then.
		if onExit != nil {
			onExit(p)
		}
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal delivers sig unless the process has already been reaped (its pid
// might by then belong to someone else). A failed delivery shows up as the
// process not exiting, which stop handles.
func (p *process) signal(sig os.Signal) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
}

// stop asks the process to exit and kills it if it does not within grace;
// a zero grace kills it at once.
func (p *process) stop(grace time.Duration) error {
	if grace > 0 {
		p.signal(syscall.SIGTERM)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-p.done:
			return nil
		case <-timer.C:
		}
		p.killed = true
	}
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// exitError describes an unexpected exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited unexpectedly (%v); last lines of %s:\n%s",
		p.name, p.err, p.logPath, logTail(p.logPath, tailLines))
}

// logTail returns up to n last lines of the file at path, or a note why it
// cannot. It never fails: it only decorates other errors.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	offset := max(info.Size()-tailBytes, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return lastLines(data, n)
}

// lastLines returns the last n lines of data, without a trailing newline.
func lastLines(data []byte, n int) string {
	data = bytes.TrimRight(data, "\n")
	if len(data) == 0 {
		return "(log is empty)"
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// ProcessesMentioning lists the command lines of running processes that
// contain s, so tests can prove a cluster left nothing behind.
func ProcessesMentioning(s string) ([]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // not a process, or gone meanwhile
		}
		if strings.Contains(string(cmdline), s) {
			found = append(found, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found, nil
}
