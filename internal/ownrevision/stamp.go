package ownrevision

import (
	"sync"

	"helm.sh/helm/v4/pkg/release"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// Stamp returns d with the first revision created through it marked with
// m: the Create and every later Update of that revision store it with the
// mark (see Mark.Labelled). Other writes pass through unchanged. One
// action, one Stamp: install, upgrade and rollback each create exactly
// one revision.
func Stamp(d driver.Driver, m Mark) driver.Driver {
	return &stamped{Driver: d, mark: m}
}

type stamped struct {
	driver.Driver
	mark Mark

	mu sync.Mutex
	// key is the storage key of the revision the action created; empty
	// until its Create.
	key string
}

// Unwrap returns the wrapped driver, for readers that look for a driver
// under the wrappers (the newest-revision reader).
func (s *stamped) Unwrap() driver.Driver { return s.Driver }

func (s *stamped) Create(key string, rls release.Releaser) error {
	s.mu.Lock()
	if s.key == "" {
		if _, ok := rls.(*releasev1.Release); ok {
			s.key = key
		}
	}
	s.mu.Unlock()
	return s.Driver.Create(key, s.marked(key, rls))
}

func (s *stamped) Update(key string, rls release.Releaser) error {
	return s.Driver.Update(key, s.marked(key, rls))
}

// marked is rls with the mark when it is the revision the action created.
func (s *stamped) marked(key string, rls release.Releaser) release.Releaser {
	s.mu.Lock()
	own := key == s.key
	s.mu.Unlock()
	rel, ok := rls.(*releasev1.Release)
	if !own || !ok || rel == nil {
		return rls
	}
	return s.mark.Labelled(rel)
}
