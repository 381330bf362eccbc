//go:build !linux

package cluster

import "syscall"

// childAttrs has no parent-death signal outside Linux; Stop still ends every
// component, but a crashed test process may leave them running.
func childAttrs() *syscall.SysProcAttr { return nil }
