package reconcile

import (
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder is the part of fluxcd/pkg/runtime/events.Recorder the
// state machine uses: events with metadata notification-controller reads,
// and the Flux 2.10 action (upstream's v2.Action) of what they report.
type EventRecorder interface {
	AnnotatedEventf(object, related runtime.Object, annotations map[string]string, eventtype, reason, action, messageFmt string, args ...any)
}

// eventActions is the action of each reason the state machine's events
// carry. A reason not listed reports on the reconcile as a whole (a state
// that cannot be read, retries exhausted).
var eventActions = map[string]helmv2.Action{
	helmv2.InstallSucceededReason:   helmv2.ActionHelmInstall,
	helmv2.InstallFailedReason:      helmv2.ActionHelmInstall,
	helmv2.UpgradeSucceededReason:   helmv2.ActionHelmUpgrade,
	helmv2.UpgradeFailedReason:      helmv2.ActionHelmUpgrade,
	helmv2.TestSucceededReason:      helmv2.ActionHelmTest,
	helmv2.TestFailedReason:         helmv2.ActionHelmTest,
	helmv2.RollbackSucceededReason:  helmv2.ActionHelmRollback,
	helmv2.RollbackFailedReason:     helmv2.ActionHelmRollback,
	helmv2.UninstallSucceededReason: helmv2.ActionHelmUninstall,
	helmv2.UninstallFailedReason:    helmv2.ActionHelmUninstall,
	helmv2.DriftDetectedReason:      helmv2.ActionDriftDetection,
	DriftCorrectedReason:            helmv2.ActionDriftDetection,
	DriftCorrectionFailedReason:     helmv2.ActionDriftDetection,
	DriftDetectionFailedReason:      helmv2.ActionDriftDetection,
	meta.HealthCheckCanceledReason:  helmv2.ActionHealthCheck,
	pendingReleaseReason:            helmv2.ActionUnlock,
}

// EventAction is the action an event of the state machine with reason
// reports on.
func EventAction(reason string) helmv2.Action {
	if action, ok := eventActions[reason]; ok {
		return action
	}
	return helmv2.ActionReconcile
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
	m.Recorder.AnnotatedEventf(req.Object, nil, eventMeta(req, s), eventType, reason, EventAction(reason).String(), "%s", msg)
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
