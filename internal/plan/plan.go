package plan

import (
	"context"
	"encoding/json"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/helmverb"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Verb names a Helm action; the names live in internal/helmverb, so that
// packages below the plan (internal/afterhooks) share them, and are
// repeated here for the plan's users.
type Verb = helmverb.Verb

const (
	Install   = helmverb.Install
	Upgrade   = helmverb.Upgrade
	Rollback  = helmverb.Rollback
	Uninstall = helmverb.Uninstall
	Test      = helmverb.Test
)

// Wait is how an action waits, decided once from the spec and the
// controller's settings.
type Wait struct {
	// Helm is the strategy Helm's own action runs with: hookOnly when the
	// action disables its wait or waits after its hooks (afterHooks),
	// else Readiness.
	Helm kube.WaitStrategy `json:"helm,omitempty"`
	// Readiness is how the release's resources are waited for whenever
	// something waits for them: Helm, the batches of an ordered action,
	// the afterHooks wait. From spec.waitStrategy.name and the
	// UseHelm3Defaults gate.
	Readiness kube.WaitStrategy `json:"readiness,omitempty"`
	// WaitForJobs is false when the action sets disableWaitForJobs.
	WaitForJobs bool `json:"waitForJobs"`
	// Timeout is the action's timeout (its own, else spec.timeout, else
	// the default); recreates and ordered batches end by it too.
	Timeout time.Duration `json:"timeout"`
}

// Ordering sources.
const (
	// FromSpec: an install or upgrade orders the chart it renders, as
	// spec.waitStrategy.name ordered asks.
	FromSpec = "spec"
	// FromRevision: a rollback or uninstall follows the order the stored
	// revision recorded, whatever the HelmRelease says now.
	FromRevision = "revision"
)

// Ordering says whether the action applies (or deletes) in order.
type Ordering struct {
	// From is FromSpec, FromRevision, or empty: all at once.
	From string `json:"from,omitempty"`
	// ReadinessTimeout bounds the wait of each batch
	// (spec.waitStrategy.readinessTimeout); zero leaves only the
	// action's timeout, which it never outlasts.
	ReadinessTimeout time.Duration `json:"readinessTimeout,omitempty"`
	// Charts are the subchart facts the revision recorded (FromRevision);
	// an ordered install or upgrade reads them from its chart.
	Charts sequencing.Charts `json:"-"`
	// Manifest is the manifest of the revision an uninstall deletes in
	// order: Helm builds its list without the lines that name each
	// object's chart.
	Manifest string `json:"-"`
}

// Ordered tells whether the action applies in order.
func (o Ordering) Ordered() bool { return o.From != "" }

// Revision is the stored revision a rollback restores or an uninstall
// removes, as the runner read it before the action.
type Revision struct {
	// Version is the revision number; 0 when it could not be read.
	Version int `json:"version,omitempty"`
	// ApplyMethod is how it was applied ("ssa", "csa" or empty); a
	// rollback's serverSideApply auto follows it.
	ApplyMethod string `json:"applyMethod,omitempty"`
}

// Apply is how an install, upgrade or rollback applies the release's
// objects.
type Apply struct {
	// ServerSide tells whether Helm applies them server-side. An install:
	// spec.install.serverSideApply, else server-side unless the
	// UseHelm3Defaults gate is on. An upgrade or rollback: its
	// serverSideApply enabled or disabled, else (Auto) what Helm will
	// decide from the stored revision it starts from.
	ServerSide bool `json:"serverSide"`
	// Auto: the upgrade's or rollback's serverSideApply is auto or unset,
	// which Helm is handed as is and resolves itself, from the apply
	// method of the release's newest revision (upgrade) or of the
	// revision restored (rollback). ServerSide is that same resolution,
	// made once here so that the action can hand Helm force flags it
	// accepts and apply the chart's CRDs the way Helm applies the rest.
	Auto bool `json:"auto,omitempty"`
}

// Plan is what the runner decided about one Helm action.
type Plan struct {
	Verb Verb `json:"verb"`
	// Resumed: the action only finishes the afterHooks readiness wait of
	// a revision that an earlier run left pending (Verb is the action that
	// made it).
	Resumed bool `json:"resumed,omitempty"`
	// Release is the Helm release name.
	Release string `json:"release"`
	// HookOrder is beforeHooks or afterHooks for install, upgrade and
	// rollback; empty for the others, which have no post hooks to order
	// the readiness wait around.
	HookOrder v2.HookWaitStrategy `json:"hookOrder,omitempty"`
	Wait      Wait                `json:"wait"`
	Ordering  Ordering            `json:"ordering"`
	// Revision is the stored revision a rollback restores or an uninstall
	// removes; zero for the others.
	Revision Revision `json:"revision"`
	// Recreate lets updates recreate what the API server refuses to
	// change in place (install, upgrade, rollback); nil for the others.
	// One instance per release: drift correction uses the same.
	Recreate *recreate.Policy `json:"recreate,omitempty"`
	// RolledBackFrom, for a rollback, are the recreate consents of the
	// revision it rolls back from (the release's latest): what that
	// revision consented to recreate, the rollback may recreate back
	// (recreate.Policy.RolledBackFrom). Empty for the others.
	RolledBackFrom recreate.Consents `json:"rolledBackFrom,omitempty"`
	// HookMarks is the mark the hook objects of the release carry
	// (spec.uninstall.deleteHookResources); empty: none.
	HookMarks string `json:"hookMarks,omitempty"`
	// CleanupOnFail deletes what an upgrade or rollback created when its
	// wait fails.
	CleanupOnFail bool `json:"cleanupOnFail,omitempty"`
	// Apply is how an install, upgrade or rollback applies; nil for the
	// others.
	Apply *Apply `json:"apply,omitempty"`
	// PostRenderStrategy is what the post renderer of an install or
	// upgrade sees (spec.postRenderStrategy, else "nohooks" under the
	// UseHelm3Defaults gate, else "combined"); empty for the others. A
	// value the API does not know is kept: the action refuses it.
	PostRenderStrategy helmv2.PostRenderStrategy `json:"postRenderStrategy,omitempty"`

	// What the action runs with besides its decisions; not printed.

	// PostRenderer runs on the rendered manifests of install and upgrade;
	// nil means none.
	PostRenderer postrenderer.PostRenderer `json:"-"`
	// WaitContext, when set, bounds Helm's readiness waits (Wait and
	// WaitWithJobs) and the afterHooks wait besides their timeouts
	// (CancelHealthCheckOnNewRevision). Hook watches and the wait for
	// deletions are not bound by it: interrupting a running hook would
	// leave its side effects half done.
	WaitContext context.Context `json:"-"`
	// StatusReaders judge the readiness of the kinds they support before
	// kstatus' built-in rules do (spec.healthCheckExprs).
	StatusReaders []engine.StatusReader `json:"-"`
}

// AfterHooks tells whether the action waits for readiness after its post
// hooks (through internal/afterhooks). An uninstall never does.
func (p Plan) AfterHooks() bool {
	return p.HookOrder == v2.AfterHooks && p.Verb != Uninstall
}

// String is the plan as JSON: the decisions, without the objects the
// action runs with.
func (p Plan) String() string {
	b, err := json.Marshal(p)
	if err != nil {
		return "plan: " + err.Error()
	}
	return string(b)
}

// RecreatePolicy is the recreate policy the action's updates follow: the
// release's, with, for a rollback, the consents of the revision it rolls
// back from (the release's own stays as it is). Nil when the action
// recreates nothing.
func (p Plan) RecreatePolicy() *recreate.Policy {
	if p.Recreate == nil {
		return nil
	}
	policy := *p.Recreate
	policy.RolledBackFrom = p.RolledBackFrom
	return &policy
}
