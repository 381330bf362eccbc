package reconcile

import (
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder is the part of fluxcd/pkg/runtime/events.Recorder the
// state machine uses: events with metadata notification-controller reads.
type EventRecorder interface {
	AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// Event metadata keys upstream helm-controller attaches (prefixed with the
// API group), so alerts and commit status updates keep working: the chart
// version as revision, the values digest as token, the OCI digest and the
// app version.
const (
	metaRevisionKey   = "revision"
	metaTokenKey      = "token"
	metaOCIDigestKey  = "oci-digest"
	metaAppVersionKey = "app-version"
)

// eventMeta describes the release an event is about; s may be nil.
func eventMeta(req *Request, s *helmv2.Snapshot) map[string]string {
	meta := map[string]string{}
	put := func(key, value string) {
		if value != "" {
			meta[helmv2.GroupVersion.Group+"/"+key] = value
		}
	}
	if s != nil {
		put(metaRevisionKey, s.ChartVersion)
		put(metaTokenKey, s.ConfigDigest)
		put(metaAppVersionKey, s.AppVersion)
	}
	put(metaOCIDigestKey, req.OCIDigest)
	return meta
}

func (m *Machine) event(req *Request, s *helmv2.Snapshot, eventType, reason, msg string) {
	if m.Recorder == nil {
		return
	}
	m.Recorder.AnnotatedEventf(req.Object, eventMeta(req, s), eventType, reason, "%s", msg)
}

func (m *Machine) normal(req *Request, s *helmv2.Snapshot, reason, msg string) {
	m.event(req, s, corev1.EventTypeNormal, reason, msg)
}

func (m *Machine) warning(req *Request, s *helmv2.Snapshot, reason, msg string) {
	m.event(req, s, corev1.EventTypeWarning, reason, msg)
}

// describeRelease names a snapshot the way messages and events do:
// "ns/name.v3 with chart podinfo@6.7.1".
func describeRelease(s *helmv2.Snapshot) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%s with chart %s", s.FullReleaseName(), s.VersionedChartName())
}

// trimError keeps condition messages readable: Helm errors can be long.
func trimError(err error) string {
	msg := strings.TrimSpace(err.Error())
	const limit = 2000
	if len(msg) > limit {
		msg = msg[:limit] + "…"
	}
	return msg
}
