package redact

import (
	"fmt"

	"github.com/fluxcd/pkg/runtime/events"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Recorder is an event recorder that redacts each message with the
// Secrets the Registry holds for the event's object.
type Recorder struct {
	events.Recorder
	Registry *Registry
}

var _ events.Recorder = Recorder{}

func (r Recorder) secretsOf(object runtime.Object) *Secrets {
	m, err := meta.Accessor(object)
	if err != nil {
		return nil
	}
	return r.Registry.Get(types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
}

func (r Recorder) Eventf(object, related runtime.Object, eventtype, reason, action, messageFmt string, args ...any) {
	r.AnnotatedEventf(object, related, nil, eventtype, reason, action, messageFmt, args...)
}

func (r Recorder) AnnotatedEventf(object, related runtime.Object, annotations map[string]string, eventtype, reason, action, messageFmt string, args ...any) {
	msg := r.secretsOf(object).String(fmt.Sprintf(messageFmt, args...))
	r.Recorder.AnnotatedEventf(object, related, annotations, eventtype, reason, action, "%s", msg)
}
