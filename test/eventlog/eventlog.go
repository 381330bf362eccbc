// Package eventlog is the event recorder of the controller's tests: it
// keeps what a reconcile or a Helm action emitted, in order.
package eventlog

import (
	"fmt"
	"sync"

	"github.com/fluxcd/pkg/runtime/events"
	"k8s.io/apimachinery/pkg/runtime"
)

// Log is an events.Recorder that writes each event to Events as "<type> <reason> <message>", annotations appended as
// client-go's FakeRecorder does, and keeps the action of each reason.
type Log struct {
	Events chan string

	mu      sync.Mutex
	actions map[string][]string
}

var _ events.Recorder = (*Log)(nil)

// New returns a Log whose Events channel holds size events.
func New(size int) *Log {
	return &Log{Events: make(chan string, size), actions: map[string][]string{}}
}

func (l *Log) Eventf(object, related runtime.Object, eventtype, reason, action, messageFmt string, args ...any) {
	l.AnnotatedEventf(object, related, nil, eventtype, reason, action, messageFmt, args...)
}

func (l *Log) AnnotatedEventf(_, _ runtime.Object, annotations map[string]string, eventtype, reason, action, messageFmt string, args ...any) {
	l.mu.Lock()
	l.actions[reason] = append(l.actions[reason], action)
	l.mu.Unlock()
	msg := fmt.Sprintf(eventtype+" "+reason+" "+messageFmt, args...)
	if len(annotations) > 0 {
		msg += " " + fmt.Sprint(annotations)
	}
	l.Events <- msg
}

// ActionsOf returns the actions the events with reason carried, in order.
func (l *Log) ActionsOf(reason string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.actions[reason]...)
}
