package connect

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

// minRediscoveryInterval spaces out the discovery refreshes a miss causes,
// so a chart naming a kind that really does not exist cannot make every
// lookup hit the API server.
const minRediscoveryInterval = time.Second

// rediscoveringMapper is a REST mapper that answers a miss by refreshing
// discovery once and asking again.
//
// The deferred discovery mapper alone trusts a cache it considers fresh.
// When one release invalidates discovery after its CRDs are established,
// another reconcile can refill the shared cache a moment before the API
// server lists the new kinds; the cache is then fresh and wrong, and a
// release of a chart with those kinds fails with "no matches for kind".
type rediscoveringMapper struct {
	*restmapper.DeferredDiscoveryRESTMapper

	mu         sync.Mutex
	lastReset  time.Time
	sleep      func(time.Duration)
	now        func() time.Time
	minBetween time.Duration
}

var _ meta.ResettableRESTMapper = (*rediscoveringMapper)(nil)

// NewMapper returns a REST mapper over d that rediscovers on a miss.
func NewMapper(d discovery.CachedDiscoveryInterface) meta.ResettableRESTMapper {
	return &rediscoveringMapper{
		DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(d),
		sleep:                       time.Sleep,
		now:                         time.Now,
		minBetween:                  minRediscoveryInterval,
	}
}

func (m *rediscoveringMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	asked := m.now()
	mapping, err := m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.rediscover(asked)
		return m.DeferredDiscoveryRESTMapper.RESTMapping(gk, versions...)
	}
	return mapping, err
}

func (m *rediscoveringMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	asked := m.now()
	mappings, err := m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	if meta.IsNoMatchError(err) {
		m.rediscover(asked)
		return m.DeferredDiscoveryRESTMapper.RESTMappings(gk, versions...)
	}
	return mappings, err
}

func (m *rediscoveringMapper) KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	asked := m.now()
	gvk, err := m.DeferredDiscoveryRESTMapper.KindFor(resource)
	if meta.IsNoMatchError(err) {
		m.rediscover(asked)
		return m.DeferredDiscoveryRESTMapper.KindFor(resource)
	}
	return gvk, err
}

// rediscover drops the cached discovery unless someone else did so after
// the failed lookup began (their refresh already answers it). Refreshes
// are at least minBetween apart, so the refill comes later than the one
// that missed the new kinds.
func (m *rediscoveringMapper) rediscover(asked time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastReset.After(asked) {
		return
	}
	if wait := m.lastReset.Add(m.minBetween).Sub(m.now()); wait > 0 {
		m.sleep(wait)
	}
	m.DeferredDiscoveryRESTMapper.Reset()
	m.lastReset = m.now()
}
