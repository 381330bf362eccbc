package chartsource

import (
	"fmt"

	"github.com/fluxcd/pkg/cache"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// chartCacheMetricsPrefix names the chart cache's metrics the way upstream
// names those of its token cache (gotk_token_): gotk_chart_cache_events_total,
// gotk_chart_cached_items, gotk_chart_cache_requests_total and
// gotk_chart_cache_evictions_total, as fluxcd/pkg/cache defines them.
const chartCacheMetricsPrefix = "gotk_chart_"

// ownerKind is the kind of the objects that own cache entries, for the
// involved object labels of the cache events.
const ownerKind = "HelmRelease"

// newEntries is the chart LRU without metrics.
func newEntries(maxEntries int) *cache.LRU[*Chart] {
	entries, err := cache.NewLRU[*Chart](maxEntries)
	if err != nil {
		// Without options NewLRU cannot fail.
		panic(fmt.Sprintf("creating the chart cache: %v", err))
	}
	return entries
}

// MustRegisterMetrics exposes the chart cache's metrics on reg, typically
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry: Flux's cache metrics
// (see chartCacheMetricsPrefix) and the downloads counter. Call it before
// the first Get. Registration is explicit so that tests and multiple
// Sources do not collide on a global registry.
func (s *Source) MustRegisterMetrics(reg prometheus.Registerer) {
	entries, err := cache.NewLRU[*Chart](s.maxEntries,
		cache.WithMetricsRegisterer(reg), cache.WithMetricsPrefix(chartCacheMetricsPrefix))
	if err != nil {
		panic(fmt.Sprintf("registering the chart cache metrics: %v", err))
	}
	s.mu.Lock()
	s.entries = entries
	s.mu.Unlock()
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "helm_controller_chart_downloads_total",
			Help: "Chart artifacts downloaded from source-controller.",
		}, func() float64 { return float64(s.downloads.Load()) }),
	)
}

// recordEvent counts a hit or miss of owner's Get, as Flux's caches do.
func (s *Source) recordEvent(event string, owner types.NamespacedName) {
	s.entries.RecordCacheEvent(event, ownerKind, owner.Name, owner.Namespace, cache.OperationReconcile)
}

// forgetEvents drops the event series of an owner that is gone.
func (s *Source) forgetEvents(owner types.NamespacedName) {
	for _, event := range []string{cache.CacheEventTypeHit, cache.CacheEventTypeMiss} {
		s.entries.DeleteCacheEvent(event, ownerKind, owner.Name, owner.Namespace, cache.OperationReconcile)
	}
}
