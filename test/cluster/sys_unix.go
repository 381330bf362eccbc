//go:build unix

package cluster

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// tryLock takes an exclusive, non-blocking flock on f. It reports false when
// another open file holds the lock, including one in this process.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return false, fmt.Errorf("locking %s: %w", f.Name(), err)
}
