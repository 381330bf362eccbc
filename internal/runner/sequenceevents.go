package runner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	corev1 "k8s.io/api/core/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
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
	// ResourceGroupStuckReason: a batch could not be deleted in time, or
	// its deletion was refused; the message names what holds it. The
	// batches it needs are deleted all the same.
	ResourceGroupStuckReason = "ResourceGroupStuck"
)

// The events of applied, ready and deleting batches report progress, not
// outcomes: they are Flux trace events, Kubernetes events that are not
// sent to notification-controller. Warnings and stuck batches are
// outcomes a user must hear of.

// shownResources caps the objects a progress message lists.
const shownResources = 5

// sequenceObserver turns the batches of an ordered action (see
// internal/sequencing) into what a Flux user sees: an event per batch, the
// Reconciling condition naming the group being applied or waited for,
// and the "group" phase of the phase duration metric.
type sequenceObserver struct {
	obj       *v2.HelmRelease
	verb      plan.Verb
	hookOrder string
	// recorder and progress may be nil.
	recorder reconcile.EventRecorder
	progress Progress

	mu      sync.Mutex
	started map[int]time.Time
}

func (o *sequenceObserver) observe(p sequencing.Progress) {
	label := fmt.Sprintf("group %s %d/%d", p.Batch, p.Index, p.Total)
	msg := ""
	switch p.Phase {
	case sequencing.PhaseApplying:
		o.mark(p.Index)
		msg = fmt.Sprintf("%s: applying %s", label, listed(p.Resources))
		o.event(eventv1.EventTypeTrace, ResourceGroupAppliedReason, fmt.Sprintf("Resource group %s (%d/%d) applied: %s", p.Batch, p.Index, p.Total, listed(p.Resources)))
	case sequencing.PhaseWaiting:
		msg = fmt.Sprintf("%s: waiting for %s", label, listed(p.Resources))
		if p.Detail != "" {
			msg = fmt.Sprintf("%s: waiting for %s", label, p.Detail)
		}
	case sequencing.PhaseReady:
		if began, ok := o.took(p.Index); ok {
			phaseDuration.WithLabelValues(string(o.verb), o.hookOrder, "group").Observe(time.Since(began).Seconds())
		}
		o.event(eventv1.EventTypeTrace, ResourceGroupReadyReason, fmt.Sprintf("Resource group %s (%d/%d) is ready", p.Batch, p.Index, p.Total))
	case sequencing.PhaseDeleting:
		msg = fmt.Sprintf("%s: deleting %s", label, listed(p.Resources))
		o.event(eventv1.EventTypeTrace, ResourceGroupDeletingReason, fmt.Sprintf("Resource group %s (%d/%d) deleting: %s", p.Batch, p.Index, p.Total, listed(p.Resources)))
	case sequencing.PhaseStuck:
		o.event(corev1.EventTypeWarning, ResourceGroupStuckReason, fmt.Sprintf("Resource group %s (%d/%d) not deleted: %s; deleting the groups before it all the same", p.Batch, p.Index, p.Total, p.Detail))
	}
	if p.Removal {
		// The batches of the revision an upgrade replaces are not the
		// plan in the status.
		reportProgress(o.progress, msg)
		return
	}
	o.update(func(obj *v2.HelmRelease) { setBatchPhase(obj.Status.Sequence, p) }, msg)
}

// update changes the status through the progress reporter, which patches
// it; without one only the object in memory changes.
func (o *sequenceObserver) update(change func(*v2.HelmRelease), msg string) {
	if o.progress != nil {
		o.progress.Update(change, msg)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	change(o.obj)
}

// planned shows the plan of an ordered action in the status, every batch
// pending.
func (o *sequenceObserver) planned(p sequencing.Planned) {
	if p.Plan == nil {
		return
	}
	seq := sequenceStatus(o.verb, p)
	o.update(func(obj *v2.HelmRelease) { obj.Status.Sequence = seq }, "")
}

// Caps that keep status.sequence small at fleet scale: a chart with
// hundreds of groups, or long messages, must not grow every HelmRelease.
const (
	shownBatches  = 100
	shownWarnings = 10
	detailLength  = 300
)

// pendingPhase is the phase of a batch that has not started.
const pendingPhase = "pending"

// sequenceStatus is the status form of a plan: batches in order, with
// the positions (from 1) of those each needs, all pending. An uninstall
// goes last first: a batch waits for the batches that needed it.
func sequenceStatus(verb plan.Verb, p sequencing.Planned) *v2.SequenceStatus {
	seq := &v2.SequenceStatus{Action: string(verb)}
	for i, b := range p.Plan.Batches {
		if i == shownBatches {
			seq.Warnings = append(seq.Warnings, fmt.Sprintf("%d more batches not shown", len(p.Plan.Batches)-shownBatches))
			break
		}
		needs := b.Predecessors()
		if p.Deleting {
			needs = nil
			for j, later := range p.Plan.Batches {
				if slices.Contains(later.Predecessors(), i) {
					needs = append(needs, j)
				}
			}
		}
		sb := v2.SequenceBatch{Name: b.Name, Resources: len(b.Resources), Phase: pendingPhase}
		for _, n := range needs {
			sb.Needs = append(sb.Needs, n+1)
		}
		seq.Batches = append(seq.Batches, sb)
	}
	for i, w := range p.Plan.Warnings {
		if i == shownWarnings {
			seq.Warnings = append(seq.Warnings, fmt.Sprintf("%d more warnings in the events", len(p.Plan.Warnings)-shownWarnings))
			break
		}
		seq.Warnings = append(seq.Warnings, truncated(w, 2*detailLength))
	}
	return seq
}

// setBatchPhase records where batch p.Index of seq is.
func setBatchPhase(seq *v2.SequenceStatus, p sequencing.Progress) {
	if seq == nil || p.Index < 1 || p.Index > len(seq.Batches) {
		return
	}
	b := &seq.Batches[p.Index-1]
	if b.Name != p.Batch {
		return // a plan other than the one shown
	}
	b.Phase = string(p.Phase)
	b.Detail = truncated(p.Detail, detailLength)
}

func truncated(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
	o.recorder.AnnotatedEventf(o.obj, nil, attemptEventMeta(o.obj), eventType, reason, o.verb.EventAction().String(), "%s", msg)
}

// newSequenceObserver returns the observer of one action (verb: install,
// upgrade, rollback or uninstall) of obj under the hook order.
func newSequenceObserver(obj *v2.HelmRelease, verb plan.Verb, hookOrder v2.HookWaitStrategy, recorder reconcile.EventRecorder, progress Progress) *sequenceObserver {
	if hookOrder == "" {
		hookOrder = v2.BeforeHooks
	}
	return &sequenceObserver{obj: obj, verb: verb, hookOrder: string(hookOrder), recorder: recorder, progress: progress, started: map[int]time.Time{}}
}

// listed names up to shownResources objects, then how many more.
func listed(names []string) string {
	if len(names) <= shownResources {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shownResources], ", "), len(names)-shownResources)
}
