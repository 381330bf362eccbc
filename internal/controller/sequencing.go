package controller

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Reasons of the events about the resource groups of a HelmRelease with
// spec.waitStrategy.name ordered.
const (
	// ResourceGroupAppliedReason: a batch of groups was sent to the cluster.
	ResourceGroupAppliedReason = "ResourceGroupApplied"
	// ResourceGroupReadyReason: every object of a batch is ready; the next
	// batch may start.
	ResourceGroupReadyReason = "ResourceGroupReady"
	// ResourceGroupDeletingReason: a batch is being deleted, last first.
	ResourceGroupDeletingReason = "ResourceGroupDeleting"
	// ResourceGroupWarningReason: the chart's ordering annotations are
	// misconfigured; the objects concerned are applied unsequenced.
	ResourceGroupWarningReason = "ResourceGroupWarning"
)

// shownResources caps the objects a progress message lists.
const shownResources = 5

// sequenceObserver turns the batches of an ordered action (see
// internal/sequencing) into what a Flux user sees: an event per batch, the
// Reconciling condition naming the group being applied or waited for,
// and the "group" phase of the phase duration metric.
type sequenceObserver struct {
	obj      *v2.HelmRelease
	verb     string
	strategy string
	// recorder and progress may be nil.
	recorder reconcile.EventRecorder
	progress *progressReporter

	mu      sync.Mutex
	started map[int]time.Time
}

func (o *sequenceObserver) observe(p sequencing.Progress) {
	label := fmt.Sprintf("group %s %d/%d", p.Batch, p.Index, p.Total)
	switch p.Phase {
	case sequencing.PhaseApplying:
		o.mark(p.Index)
		o.progress.report(fmt.Sprintf("%s: applying %s", label, listed(p.Resources)))
		o.event(corev1.EventTypeNormal, ResourceGroupAppliedReason, fmt.Sprintf("Resource group %s (%d/%d) applied: %s", p.Batch, p.Index, p.Total, listed(p.Resources)))
	case sequencing.PhaseWaiting:
		o.progress.report(fmt.Sprintf("%s: waiting for %s", label, listed(p.Resources)))
	case sequencing.PhaseReady:
		if began, ok := o.took(p.Index); ok {
			phaseDuration.WithLabelValues(o.verb, o.strategy, "group").Observe(time.Since(began).Seconds())
		}
		o.event(corev1.EventTypeNormal, ResourceGroupReadyReason, fmt.Sprintf("Resource group %s (%d/%d) is ready", p.Batch, p.Index, p.Total))
	case sequencing.PhaseDeleting:
		o.progress.report(fmt.Sprintf("%s: deleting %s", label, listed(p.Resources)))
		o.event(corev1.EventTypeNormal, ResourceGroupDeletingReason, fmt.Sprintf("Resource group %s (%d/%d) deleting: %s", p.Batch, p.Index, p.Total, listed(p.Resources)))
	}
}

func (o *sequenceObserver) warn(msg string) {
	o.event(corev1.EventTypeWarning, ResourceGroupWarningReason, msg)
}

func (o *sequenceObserver) mark(index int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started[index] = time.Now()
}

func (o *sequenceObserver) took(index int) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	began, ok := o.started[index]
	return began, ok
}

func (o *sequenceObserver) event(eventType, reason, msg string) {
	if o.recorder == nil {
		return
	}
	o.recorder.AnnotatedEventf(o.obj, nil, nil, eventType, reason, actionOfVerb(o.verb).String(), "%s", msg)
}

// newSequenceObserver returns the observer of one action (verb: install,
// upgrade, rollback or uninstall) of obj under the hook wait strategy.
func newSequenceObserver(obj *v2.HelmRelease, verb string, strategy v2.HookWaitStrategy, recorder reconcile.EventRecorder, progress *progressReporter) *sequenceObserver {
	if strategy == "" {
		strategy = v2.BeforeHooks
	}
	return &sequenceObserver{obj: obj, verb: verb, strategy: string(strategy), recorder: recorder, progress: progress, started: map[int]time.Time{}}
}

// listed names up to shownResources objects, then how many more.
func listed(names []string) string {
	if len(names) <= shownResources {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shownResources], ", "), len(names)-shownResources)
}
