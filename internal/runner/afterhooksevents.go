package runner

import (
	"fmt"
	"time"

	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// AfterHooksWaitingReason is the reason of the Trace event emitted when an
// install, upgrade or rollback with waitStrategy afterHooks has run its
// post hooks and the readiness wait of its resources starts.
const AfterHooksWaitingReason = "AfterHooksWaiting"

// AfterHooksStartedReason is the reason of the Trace event emitted when an
// action with waitStrategy afterHooks starts: hooks and apply come first.
const AfterHooksStartedReason = "AfterHooksStarted"

// afterHooksObserver turns the phases of an afterHooks action (see
// internal/afterhooks) into what a Flux user sees: events, the Reconciling
// condition and the phase duration metric.
type afterHooksObserver struct {
	obj *v2.HelmRelease
	// release is the Helm release name.
	release string
	// recorder may be nil.
	recorder reconcile.EventRecorder
	// progress may be nil.
	progress Progress
}

var _ afterhooks.Observer = (*afterHooksObserver)(nil)

func (o *afterHooksObserver) Started(verb plan.Verb) {
	reportProgress(o.progress, fmt.Sprintf("running %s hooks and applying resources (afterHooks)", verb))
	o.event(verb, nil, eventv1.EventTypeTrace, AfterHooksStartedReason,
		fmt.Sprintf("Helm %s of %s started with waitStrategy afterHooks: pre-%s hooks, apply, post-%s hooks, then the readiness wait",
			verb, o.release, verb, verb))
}

func (o *afterHooksObserver) HookStarted(p afterhooks.HookProgress) {
	reportProgress(o.progress, p.String())
}

func (o *afterHooksObserver) Waiting(verb plan.Verb, rel *releasev1.Release, timeout time.Duration, resumed bool) {
	reportProgress(o.progress, waitingFor(rel))
	if resumed {
		o.event(verb, rel, eventv1.EventTypeTrace, AfterHooksWaitingReason,
			fmt.Sprintf("Resuming the readiness wait of %s.v%d after a restart; hooks are not run again; waiting up to %s",
				rel.Name, rel.Version, timeout.Round(time.Second)))
		return
	}
	o.event(verb, rel, eventv1.EventTypeTrace, AfterHooksWaitingReason,
		fmt.Sprintf("Post-%s hooks of %s.v%d completed; waiting up to %s for its resources to become ready",
			verb, rel.Name, rel.Version, timeout))
}

func (o *afterHooksObserver) PhaseDone(verb plan.Verb, phase string, took time.Duration) {
	phaseDuration.WithLabelValues(string(verb), string(v2.AfterHooks), phase).Observe(took.Seconds())
}

// event emits an event about the HelmRelease. The afterHooks phases are
// progress, so their type is Trace, as upstream's progress events: a
// Kubernetes event that notification-controller never receives, so alerts
// carry only outcomes (the Helm action's success or failure that
// follows). It carries the
// chart version of rel as revision and the digest of its values as token,
// as the events of the Helm action it belongs to do; without rel, those of
// the attempt.
func (o *afterHooksObserver) event(verb plan.Verb, rel *releasev1.Release, eventType, reason, msg string) {
	if o.recorder == nil {
		return
	}
	meta := attemptEventMeta(o.obj)
	if rel != nil && rel.Chart != nil && rel.Chart.Metadata != nil {
		meta = releaseEventMeta(rel.Chart.Metadata.Version, chartutil.DigestValues(digest.Canonical, rel.Config).String())
	}
	o.recorder.AnnotatedEventf(o.obj, nil, meta, eventType, reason, verb.EventAction().String(), "%s", msg)
}
