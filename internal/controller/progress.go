package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	"github.com/prometheus/client_golang/prometheus"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/redact"
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

// MustRegisterMetrics registers the controller's own metrics.
func MustRegisterMetrics(reg prometheus.Registerer) {
	reg.MustRegister(phaseDuration)
}

func observePhase(action string, strategy v2.HookWaitStrategy, phase string, started time.Time) {
	phaseDuration.WithLabelValues(action, string(strategy), phase).Observe(time.Since(started).Seconds())
}

// progressReporter writes what a running action is doing into the
// Reconciling condition, so `kubectl get hr` and `flux get hr` show it. It
// may be called from Helm's goroutines; once closed it drops late reports,
// so it never races the reconcile that owns the object.
type progressReporter struct {
	mu      sync.Mutex
	closed  bool
	ctx     context.Context
	obj     *v2.HelmRelease
	patcher *patch.SerialPatcher
	owner   string
	// redactions keep Secret values out of the conditions written.
	redactions *redact.Registry
}

func (p *progressReporter) report(msg string) {
	p.update(nil, msg)
}

// update applies change (when not nil) to the object's status and marks
// it Reconciling with msg (when not empty), then patches both.
func (p *progressReporter) update(change func(*v2.HelmRelease), msg string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if change != nil {
		change(p.obj)
	}
	if msg != "" {
		conditions.MarkReconciling(p.obj, meta.ProgressingReason, "%s", msg)
	}
	redactConditions(p.obj, p.redactions)
	if err := p.patcher.Patch(p.ctx, p.obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(p.owner)); err != nil {
		ctrl.LoggerFrom(p.ctx).V(1).Info("could not report progress", "message", msg, "error", err.Error())
	}
}

// close stops reporting; the reconcile owns the object again.
func (p *progressReporter) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
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
