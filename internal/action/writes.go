package action

import (
	"strconv"
	"sync"

	"helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// WriteLog remembers the last release record Helm wrote to storage through
// the drivers it wraps, so the caller knows what an action stored (a new
// revision, a pending one, nothing at all when rendering failed) without
// reading storage back.
type WriteLog struct {
	mu   sync.Mutex
	last *releasev1.Release
	// seq counts the writes and deletes, so a reader can tell whether
	// storage changed since it last looked.
	seq uint64
}

// Seq is the number of writes and deletes recorded so far.
func (l *WriteLog) Seq() uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Wrap returns d with its writes recorded in l; pass it to
// WithStorageDriver.
func (l *WriteLog) Wrap(d driver.Driver) driver.Driver { return &loggedDriver{Driver: d, log: l} }

// Last returns a copy of the last release written (created or updated)
// and not deleted since, or nil.
func (l *WriteLog) Last() *releasev1.Release {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return nil
	}
	return CopyRelease(l.last)
}

// CopyRelease copies rel with its own Info, the part callers change (an
// unlock sets the status, then writes it back); the chart, manifest and
// hooks are shared, not copied.
func CopyRelease(rel *releasev1.Release) *releasev1.Release {
	c := *rel
	if rel.Info != nil {
		info := *rel.Info
		c.Info = &info
	}
	return &c
}

func (l *WriteLog) wrote(rls release.Releaser) {
	rel, ok := rls.(*releasev1.Release)
	if !ok || rel == nil {
		return
	}
	c := CopyRelease(rel)
	l.mu.Lock()
	l.last = c
	l.seq++
	l.mu.Unlock()
}

func (l *WriteLog) deleted(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if l.last != nil && key == storageKey(l.last) {
		l.last = nil
	}
}

// storageKey is Helm's storage key of rel (pkg/storage makeKey).
func storageKey(rel *releasev1.Release) string {
	return "sh.helm.release.v1." + rel.Name + ".v" + strconv.Itoa(rel.Version)
}

// loggedDriver records successful writes of the driver it wraps.
type loggedDriver struct {
	driver.Driver
	log *WriteLog
}

// Unwrap returns the wrapped driver, for reads the log has no part in.
func (d *loggedDriver) Unwrap() driver.Driver { return d.Driver }

func (d *loggedDriver) Create(key string, rls release.Releaser) error {
	if err := d.Driver.Create(key, rls); err != nil {
		return err
	}
	d.log.wrote(rls)
	return nil
}

func (d *loggedDriver) Update(key string, rls release.Releaser) error {
	if err := d.Driver.Update(key, rls); err != nil {
		return err
	}
	d.log.wrote(rls)
	return nil
}

func (d *loggedDriver) Delete(key string) (release.Releaser, error) {
	rls, err := d.Driver.Delete(key)
	if err == nil {
		d.log.deleted(key)
	}
	return rls, err
}
