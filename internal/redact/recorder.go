package redact

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kuberecorder "k8s.io/client-go/tools/record"
)

// Recorder is an event recorder that redacts each message with the
// Secrets the Registry holds for the event's object.
type Recorder struct {
	kuberecorder.EventRecorder
	Registry *Registry
}

var _ kuberecorder.EventRecorder = Recorder{}

func (r Recorder) secretsOf(object runtime.Object) *Secrets {
	m, err := meta.Accessor(object)
	if err != nil {
		return nil
	}
	return r.Registry.Get(types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
}

func (r Recorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.EventRecorder.Event(object, eventtype, reason, r.secretsOf(object).String(message))
}

func (r Recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(object, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r Recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	msg := r.secretsOf(object).String(fmt.Sprintf(messageFmt, args...))
	r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, "%s", msg)
}
