package controller

import (
	"fmt"
	"sync"

	"github.com/fluxcd/pkg/runtime/events"
	"k8s.io/apimachinery/pkg/runtime"
)

// eventLog is the events.Recorder of the reconciler tests: it writes each
// event to Events as "<type> <reason> <message>", annotations appended as
// client-go's FakeRecorder does, and keeps the action of each reason.
type eventLog struct {
	Events chan string

	mu      sync.Mutex
	actions map[string][]string
}

var _ events.Recorder = (*eventLog)(nil)

func newEventLog(size int) *eventLog {
	return &eventLog{Events: make(chan string, size), actions: map[string][]string{}}
}

func (l *eventLog) Eventf(object, related runtime.Object, eventtype, reason, action, messageFmt string, args ...any) {
	l.AnnotatedEventf(object, related, nil, eventtype, reason, action, messageFmt, args...)
}

func (l *eventLog) AnnotatedEventf(_, _ runtime.Object, annotations map[string]string, eventtype, reason, action, messageFmt string, args ...any) {
	l.mu.Lock()
	l.actions[reason] = append(l.actions[reason], action)
	l.mu.Unlock()
	msg := fmt.Sprintf(eventtype+" "+reason+" "+messageFmt, args...)
	if len(annotations) > 0 {
		msg += " " + fmt.Sprint(annotations)
	}
	l.Events <- msg
}

// actionsOf returns the actions the events with reason carried, in order.
func (l *eventLog) actionsOf(reason string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.actions[reason]...)
}
