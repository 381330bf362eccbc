package controller

import (
	"context"
	"sync"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/redact"
	"github.com/afterhooks/helm-controller/internal/runner"
)

// MustRegisterMetrics registers the controller's own metrics: those of the
// Helm actions.
func MustRegisterMetrics(reg prometheus.Registerer) {
	runner.MustRegisterMetrics(reg)
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
	patcher *releasePatcher
	owner   string
	// redactions keep Secret values out of the conditions written.
	redactions *redact.Registry
	// deferred: the Reconciling mark of the reconcile's start is not
	// written yet (see markInProgress); begin writes it.
	deferred bool
}

// The runner reports through it.
var _ runner.Progress = (*progressReporter)(nil)

// Report marks the Reconciling condition with msg and patches it.
func (p *progressReporter) Report(msg string) {
	p.Update(nil, msg)
}

// Update applies change (when not nil) to the object's status and marks
// it Reconciling with msg (when not empty), then patches both.
func (p *progressReporter) Update(change func(*v2.HelmRelease), msg string) {
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
	p.deferred = false
	redactConditions(p.obj, p.redactions)
	if err := p.patcher.Patch(p.ctx, p.obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(p.owner)); err != nil {
		ctrl.LoggerFrom(p.ctx).V(1).Info("could not report progress", "message", msg, "error", err.Error())
	}
}

// begin writes the Reconciling mark held back at the start of the
// reconcile, once, before the reconcile does more than check the release.
func (p *progressReporter) begin() {
	if p == nil {
		return
	}
	p.mu.Lock()
	deferred := p.deferred
	p.mu.Unlock()
	if deferred {
		p.Update(nil, "")
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
