package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// state is the bookkeeping of one cluster directory. Besides what the cluster
// itself writes there (kubeconfig, logs/, etcd/ ...), the CLI keeps:
//   - markerFile: proof the directory is ours, so `up` may wipe it;
//   - pidFile: the pid of `serve`;
//   - readyFile: present while the cluster is ready;
//   - serveLogFile: the output of `serve`.
type state struct{ dir string }

const (
	markerFile   = ".afterhooks-cluster"
	pidFile      = "serve.pid"
	readyFile    = "ready"
	serveLogFile = "serve.log"
)

func newState(dir string) state { return state{dir: dir} }

func (s state) path(name string) string { return filepath.Join(s.dir, name) }
func (s state) kubeconfig() string      { return s.path("kubeconfig") }
func (s state) serveLog() string        { return s.path(serveLogFile) }

func (s state) ready() bool {
	_, err := os.Stat(s.path(readyFile))
	return err == nil
}

func (s state) markReady() error {
	if err := os.WriteFile(s.path(readyFile), []byte(s.kubeconfig()+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing ready marker: %w", err)
	}
	return nil
}

func (s state) writePID(pid int) error {
	if err := os.WriteFile(s.path(pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing pid file: %w", err)
	}
	return nil
}

// clear removes the run markers; the logs stay for a post-mortem until the
// next `up`.
func (s state) clear() {
	_ = os.Remove(s.path(readyFile))
	_ = os.Remove(s.path(pidFile))
}

// running returns the pid of a live `serve` for this directory. A stale pid
// file, or one whose pid now belongs to another program, counts as not running.
func (s state) running() (int, bool) {
	data, err := os.ReadFile(s.path(pidFile))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	if !alive(pid) || !servesDir(pid, s.dir) {
		return 0, false
	}
	return pid, true
}

// reset prepares an empty directory for a new cluster. It deletes only a
// directory this tool created, never an arbitrary one given by mistake.
func (s state) reset() error {
	entries, err := os.ReadDir(s.dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("reading %s: %w", s.dir, err)
	case len(entries) == 0:
	default:
		if _, err := os.Stat(s.path(markerFile)); err != nil {
			return fmt.Errorf("%s is not empty and was not created by this tool; remove it or pick another --dir", s.dir)
		}
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("removing the previous cluster in %s: %w", s.dir, err)
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", s.dir, err)
	}
	if err := os.WriteFile(s.path(markerFile), nil, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", markerFile, err)
	}
	return nil
}

// alive reports whether pid is a process that has not exited. A zombie (dead,
// not yet reaped, common in containers whose init does not reap) is dead.
func alive(pid int) bool {
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		return procState(stat) != 'Z'
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// procState extracts the state letter from /proc/<pid>/stat, which follows
// the command name in parentheses (the name itself may contain ") ").
func procState(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// servesDir checks that pid is `serve` for dir, so a recycled pid is never
// signalled. Without /proc it trusts the pid file.
func servesDir(pid int, dir string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if errors.Is(err, os.ErrNotExist) {
		_, procErr := os.Stat("/proc/self")
		return procErr != nil
	}
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	return slices.Contains(args, "serve") && slices.Contains(args, dir)
}

// tail returns the last lines of a file for error messages.
func tail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
