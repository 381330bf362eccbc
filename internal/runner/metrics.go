package runner

import (
	"fmt"
	"strings"
	"time"

	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/prometheus/client_golang/prometheus"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// phaseDuration records how long the phases of Helm actions take, by action
// and wait strategy: "helm" is Helm's own run (hooks and apply, and under
// beforeHooks also the readiness wait), "readiness" is the afterHooks wait,
// "group" one batch of resource groups of an ordered action.
var phaseDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "helm_controller_action_phase_duration_seconds",
	Help:    "Duration of the phases of Helm actions, by action (install, upgrade, rollback), wait strategy (beforeHooks, afterHooks) and phase (helm, readiness, group: one resource group of an ordered action, applied and ready).",
	Buckets: []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800},
}, []string{"action", "strategy", "phase"})

// MustRegisterMetrics registers the metrics of the Helm actions.
func MustRegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(phaseDuration)
}

func observePhase(verb plan.Verb, hookOrder v2.HookWaitStrategy, phase string, started time.Time) {
	phaseDuration.WithLabelValues(string(verb), string(hookOrder), phase).Observe(time.Since(started).Seconds())
}

// reportProgress marks the Reconciling condition with msg through p, when
// there is a p.
func reportProgress(p Progress, msg string) {
	if p != nil {
		p.Report(msg)
	}
}

// waitingFor words the readiness wait of rel: "waiting for 3 resources:
// deployment/app, service/app, job/seed".
func waitingFor(rel *releasev1.Release) string {
	objects, err := ssautil.ReadObjects(strings.NewReader(rel.Manifest))
	if err != nil || len(objects) == 0 {
		return fmt.Sprintf("waiting for the resources of %s.v%d to become ready", rel.Name, rel.Version)
	}
	const shown = 5
	names := make([]string, 0, shown)
	for i, o := range objects {
		if i == shown {
			names = append(names, "…")
			break
		}
		names = append(names, strings.ToLower(o.GetKind())+"/"+o.GetName())
	}
	return fmt.Sprintf("waiting for %d resources: %s", len(objects), strings.Join(names, ", "))
}
