package cluster

import "syscall"

// childAttrs makes the kernel kill a component when the process that started
// it dies, so a test binary killed by a timeout or SIGKILL leaves nothing
// running. The signal follows the starting OS thread; Go only retires threads
// of goroutines that exit while locked to them, which this package never does.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
