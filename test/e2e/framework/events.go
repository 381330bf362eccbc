package framework

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons of the afterHooks strategy (internal/controller), as
// notification-controller and `kubectl get events` show them.
const (
	// AfterHooksStartedReason: an action started with waitStrategy
	// afterHooks.
	AfterHooksStartedReason = "AfterHooksStarted"
	// AfterHooksWaitingReason: the post hooks completed and the readiness
	// wait runs, or resumes after a restart.
	AfterHooksWaitingReason = "AfterHooksWaiting"
)

// Event reasons of spec.waitStrategy.name ordered (internal/controller).
const (
	// ResourceGroupAppliedReason: a batch of resource groups was applied.
	ResourceGroupAppliedReason = "ResourceGroupApplied"
	// ResourceGroupReadyReason: a batch is ready; the next may start.
	ResourceGroupReadyReason = "ResourceGroupReady"
	// ResourceGroupDeletingReason: a batch is being deleted, last first.
	ResourceGroupDeletingReason = "ResourceGroupDeleting"
	// ResourceGroupWarningReason: misconfigured ordering annotations.
	ResourceGroupWarningReason = "ResourceGroupWarning"
)

// EventWant picks events of a HelmRelease. Empty fields match anything.
type EventWant struct {
	Type     string
	Reason   string
	Contains string
	// Revision requires the revision annotation notification-controller
	// reads.
	Revision bool
}

func (w EventWant) matches(e corev1.Event) bool {
	return (w.Type == "" || e.Type == w.Type) && (w.Reason == "" || e.Reason == w.Reason) &&
		strings.Contains(e.Message, w.Contains) &&
		(!w.Revision || e.Annotations["helm.toolkit.fluxcd.io/revision"] != "")
}

func (w EventWant) String() string {
	s := strings.TrimSpace(w.Type + " " + w.Reason + " event")
	if w.Contains != "" {
		s += fmt.Sprintf(" containing %q", w.Contains)
	}
	if w.Revision {
		s += " with a revision annotation"
	}
	return s
}

// Events lists the events of the HelmRelease ns/name, oldest first.
func (e *Env) Events(ctx context.Context, ns, name string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == helmv2.HelmReleaseKind && ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// WaitEvent waits up to 30 s for an event of the HelmRelease ns/name
// matching want, and returns it.
func (e *Env) WaitEvent(t testing.TB, ns, name string, want EventWant) corev1.Event {
	t.Helper()
	var found corev1.Event
	e.Eventually(t, 30*time.Second, want.String(), func(ctx context.Context) (err error) {
		found, err = e.FindEvent(ctx, ns, name, want)
		return err
	})
	return found
}

// CountEvents counts the events of the HelmRelease ns/name matching want,
// each event as many times as it occurred.
func (e *Env) CountEvents(t testing.TB, ns, name string, want EventWant) int {
	t.Helper()
	events, err := e.Events(context.Background(), ns, name)
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	n := 0
	for _, ev := range events {
		if want.matches(ev) {
			n += max(int(ev.Count), 1)
		}
	}
	return n
}

// HasEvent reports whether the HelmRelease ns/name has an event with reason.
func (e *Env) HasEvent(t testing.TB, ns, name, reason string) bool {
	t.Helper()
	return e.CountEvents(t, ns, name, EventWant{Reason: reason}) > 0
}

// WantNoEvent fails the test when the HelmRelease ns/name has an event
// matching want.
func (e *Env) WantNoEvent(t testing.TB, ns, name string, want EventWant) {
	t.Helper()
	events, err := e.Events(context.Background(), ns, name)
	if err != nil {
		t.Fatalf("listing events: %v", err)
	}
	for _, ev := range events {
		if want.matches(ev) {
			t.Fatalf("unexpected %s: %s/%s: %s", want, ev.Type, ev.Reason, ev.Message)
		}
	}
}

// ResourceRecreatedReason (internal/controller): an object refused an
// update for an immutable field was deleted and created again.
const ResourceRecreatedReason = "ResourceRecreated"
