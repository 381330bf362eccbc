package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Ports are handed to components as numbers, so there is a gap between
// choosing a port and the component binding it. Two things could take the port
// in that gap, and both are ruled out here:
//   - another cluster starting at the same moment: every port is claimed with
//     an exclusive lock on a per-port file in a machine-wide directory, held
//     until the cluster stops (the kernel drops it if the process dies);
//   - an outgoing connection (components talk to each other a lot) being given
//     the port as its local port: ports are chosen below the kernel's
//     ephemeral range, which is where the kernel picks those.
const (
	portBandLow      = 10000
	defaultEphemeral = 32768
	// minBand keeps a usable band even on machines whose ephemeral range
	// starts unusually low.
	minBand = 2000
	// maxPortAttempts bounds the search on a machine that is nearly full.
	maxPortAttempts = 2000
)

// portLockDir is shared by every cluster on the machine, whatever process
// started it, so it must not depend on a per-process TMPDIR choice.
func portLockDir() string {
	return filepath.Join(os.TempDir(), "afterhooks-test-cluster-ports")
}

// portBand returns the range [low, high) ports are chosen from.
func portBand() (int, int) {
	high := defaultEphemeral
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if low, ok := parseEphemeralLow(string(raw)); ok {
			high = low
		}
	}
	if high-portBandLow < minBand {
		high = portBandLow + minBand
	}
	return portBandLow, high
}

// parseEphemeralLow reads the first number of ip_local_port_range ("32768\t60999").
func parseEphemeralLow(s string) (int, bool) {
	fields := strings.Fields(s)
	if len(fields) != 2 {
		return 0, false
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low <= 0 || low > 65535 {
		return 0, false
	}
	return low, true
}

// portSet is a group of reserved ports; release frees them for other clusters.
type portSet struct {
	ports []int
	locks []*os.File
}

func (p *portSet) release() {
	for _, f := range p.locks {
		// Closing drops the lock. The file stays: removing it could let two
		// processes lock different inodes under the same name.
		_ = f.Close()
	}
	p.locks = nil
}

// reservePorts claims n distinct free TCP ports on 127.0.0.1.
func reservePorts(n int) (*portSet, error) {
	dir := portLockDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("creating port lock directory: %w", err)
	}
	low, high := portBand()
	set := &portSet{}
	for attempt := 0; len(set.ports) < n; attempt++ {
		if attempt == maxPortAttempts {
			set.release()
			return nil, fmt.Errorf("found only %d of %d free ports in %d-%d after %d attempts",
				len(set.ports), n, low, high-1, maxPortAttempts)
		}
		port := low + rand.IntN(high-low)
		lock, err := claimPort(dir, port)
		if err != nil {
			set.release()
			return nil, err
		}
		if lock == nil {
			continue
		}
		set.ports = append(set.ports, port)
		set.locks = append(set.locks, lock)
	}
	return set, nil
}

// claimPort locks port's file and checks nothing listens on the port. It
// returns a nil file (and no error) when the port is taken.
func claimPort(dir string, port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening port lock file: %w", err)
	}
	locked, err := tryLock(f)
	if err != nil || !locked {
		_ = f.Close()
		return nil, err
	}
	if !portFree(port) {
		_ = f.Close()
		return nil, nil
	}
	return f, nil
}

// portFree reports whether port can be bound on 127.0.0.1 right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ReserveAddress claims one free port on 127.0.0.1 the way a cluster claims
// its own, for a process started beside the cluster (a controller's metrics
// address): the port lies below the ephemeral range and stays locked against
// other test processes until release is called, which the caller does once
// the process that binds it has exited.
func ReserveAddress() (addr string, release func(), err error) {
	set, err := reservePorts(1)
	if err != nil {
		return "", nil, err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(set.ports[0])), set.release, nil
}
