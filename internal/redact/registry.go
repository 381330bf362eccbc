package redact

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Registry holds the Secrets of each HelmRelease, from its latest values,
// for the messages said about it. Safe for concurrent use; a nil Registry
// holds nothing.
type Registry struct {
	mu      sync.RWMutex
	secrets map[types.NamespacedName]*Secrets
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{secrets: map[types.NamespacedName]*Secrets{}}
}

// Set records the Secrets of the HelmRelease key; nil forgets them.
func (r *Registry) Set(key types.NamespacedName, s *Secrets) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.Len() == 0 {
		delete(r.secrets, key)
		return
	}
	r.secrets[key] = s
}

// Get returns the Secrets of key, nil when there are none.
func (r *Registry) Get(key types.NamespacedName) *Secrets {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.secrets[key]
}

// Error returns err with its message redacted for key; errors.Is and As
// still see err.
func (r *Registry) Error(key types.NamespacedName, err error) error {
	s := r.Get(key)
	if err == nil || s == nil {
		return err
	}
	msg := s.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
