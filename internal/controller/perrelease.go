package controller

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// perRelease is what the controller remembers of each HelmRelease between
// reconciles, safe for concurrent reconciles; the deletion of a
// HelmRelease forgets it.
type perRelease[V any] struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]V
}

func (p *perRelease[V]) get(key types.NamespacedName) (V, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, ok := p.byKey[key]
	return v, ok
}

func (p *perRelease[V]) set(key types.NamespacedName, v V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byKey == nil {
		p.byKey = map[types.NamespacedName]V{}
	}
	p.byKey[key] = v
}

func (p *perRelease[V]) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byKey, key)
}
