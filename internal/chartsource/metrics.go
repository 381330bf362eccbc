package chartsource

import "github.com/prometheus/client_golang/prometheus"

// MustRegisterMetrics exposes the cache counters, typically on
// sigs.k8s.io/controller-runtime/pkg/metrics.Registry. Registration is
// explicit so that tests and multiple Sources do not collide on a global
// registry.
func (s *Source) MustRegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "helm_controller_chart_downloads_total",
			Help: "Chart artifacts downloaded from source-controller.",
		}, func() float64 { return float64(s.downloads.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "helm_controller_chart_cache_hits_total",
			Help: "Chart requests served from the cache without a download.",
		}, func() float64 { return float64(s.hits.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "helm_controller_chart_cache_entries",
			Help: "Chart archives currently cached.",
		}, func() float64 { return float64(s.Stats().Entries) }),
	)
}
