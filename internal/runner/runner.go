package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/drift"
	"github.com/afterhooks/helm-controller/internal/healthcheck"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/postrender"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// Runner runs the Helm actions of one HelmRelease for the release state
// machine: it implements reconcile.Helm. It decides once per action which
// of our features apply (see plan.go), hands that to internal/action, which
// stacks the wrappers of Helm's kube client and storage in one place (its
// stack.go), and tells the reconciler what happens through events,
// progress and metrics.
type Runner struct {
	cfg *helmaction.Configuration
	// getter reaches the release's target cluster as its identity; cfg's
	// kube client and storage use it too.
	getter genericclioptions.RESTClientGetter
	// target says which cluster and identity that is.
	target *connect.Target
	obj    *v2.HelmRelease
	// config is the controller's, the same for every release.
	config action.Config
	// settings are what every plan of the release starts from, the
	// recreate policy that drift correction shares among them.
	settings plan.Settings
	// statusReaders are the compiled spec.healthCheckExprs.
	statusReaders []engine.StatusReader
	// recorder receives the events about what the actions did; may be nil.
	recorder reconcile.EventRecorder
	// progress reports phases in the Reconciling condition; may be nil.
	progress Progress
	// fieldManager is the field manager Helm applies objects with; drift
	// is compared and corrected as this manager.
	fieldManager string
	// overrideManagers are the --override-manager field managers whose
	// fields drift correction takes over.
	overrideManagers []string
	// driftIgnore are the converted spec.driftDetection ignore rules.
	driftIgnore drift.Rules
	// drift is built on first use by driftChecker.
	drift *drift.Checker
	// logs keeps Helm's last log lines for failure events.
	logs *helmLogTail
	// writes records what the actions wrote to Helm storage.
	writes *action.WriteLog
	// latest is the newest revision LastRelease read while writes was at
	// latestSeq: one storage read (and decode) per reconcile unless an
	// action wrote since.
	latestMu  sync.Mutex
	latest    *releasev1.Release
	latestSeq uint64
	// newRevision abandons readiness waits when a new reconcile is queued
	// (CancelHealthCheckOnNewRevision); its context is each plan's
	// WaitContext. Nil when the gate is off.
	newRevision NewRevision
}

// The state machine drives a Runner.
var _ reconcile.Helm = (*Runner)(nil)

func (h *Runner) releaseName() string { return h.settings.Release }

// RecorderWithLogs is rec with Helm's last log lines added to the failure
// events of the state machine.
func (h *Runner) RecorderWithLogs(rec reconcile.EventRecorder) reconcile.EventRecorder {
	if h.logs == nil {
		return rec
	}
	return logTailRecorder{EventRecorder: rec, tail: h.logs}
}

// RESTClientGetter is the release's target cluster and identity, for code
// beside the Helm actions (inventory, drift detection) that must look at
// the same objects the release applied.
func (h *Runner) RESTClientGetter() genericclioptions.RESTClientGetter { return h.getter }

// RESTConfig is the REST config of the target, impersonation included.
func (h *Runner) RESTConfig() (*rest.Config, error) { return h.getter.ToRESTConfig() }

// RESTMapper is the target cluster's REST mapper.
func (h *Runner) RESTMapper() (apimeta.RESTMapper, error) { return h.getter.ToRESTMapper() }

func (h *Runner) LastRelease(context.Context) (*releasev1.Release, error) {
	h.latestMu.Lock()
	defer h.latestMu.Unlock()
	seq := h.writes.Seq()
	if h.latest == nil || seq != h.latestSeq {
		rel, err := action.LastRelease(h.cfg, h.releaseName())
		if err != nil {
			return nil, err
		}
		h.latest, h.latestSeq = rel, seq
	}
	return action.CopyRelease(h.latest), nil
}

func (h *Runner) LastWritten() *releasev1.Release { return h.writes.Last() }

func (h *Runner) Install(ctx context.Context, chart *chartv2.Chart, values map[string]any) (*releasev1.Release, error) {
	obj := h.obj
	// Helm refuses to install over a failed or uninstalled release unless
	// told to replace it; for us both mean "install again".
	if last, err := h.LastRelease(ctx); err == nil && last.Info != nil &&
		(last.Info.Status == common.StatusFailed || last.Info.Status == common.StatusUninstalled) {
		obj = obj.DeepCopy()
		install := obj.GetInstall()
		install.Replace = true
		obj.Spec.Install = &install
	}
	return h.render(h.planFor(plan.Install), func(c action.Call) (*releasev1.Release, error) {
		return action.Install(ctx, h.cfg, obj, chart, values, c)
	})
}

func (h *Runner) Upgrade(ctx context.Context, chart *chartv2.Chart, values map[string]any) (*releasev1.Release, error) {
	return h.render(h.planFor(plan.Upgrade), func(c action.Call) (*releasev1.Release, error) {
		return action.Upgrade(ctx, h.cfg, h.obj, chart, values, c)
	})
}

// render runs the install or upgrade p plans with the post renderer
// (spec.postRenderers, spec.commonMetadata and the origin labels); invalid
// post renderers fail the action before Helm renders anything. Rollback
// needs none: it re-applies a stored, already post-rendered manifest.
func (h *Runner) render(p plan.Plan, run func(action.Call) (*releasev1.Release, error)) (*releasev1.Release, error) {
	if !p.Ordering.Ordered() {
		// The plan shown is the last ordered action's; this one is not.
		h.obj.Status.Sequence = nil
	}
	pr, err := postrender.Build(&h.obj.Spec.HelmReleaseSpec, h.obj.Name, h.obj.Namespace)
	if err != nil {
		return nil, err
	}
	p.PostRenderer = pr
	defer h.observeHelm(p, time.Now())
	rel, err := run(h.call(p))
	return rel, h.canceled(err)
}

// observeHelm records the duration of a beforeHooks Helm action (hooks,
// apply and readiness wait); afterHooks actions report their phases
// through the observer.
func (h *Runner) observeHelm(p plan.Plan, started time.Time) {
	if !p.AfterHooks() {
		observePhase(p.Verb, v2.BeforeHooks, "helm", started)
	}
}

func (h *Runner) Test(ctx context.Context) (*releasev1.Release, error) {
	return action.Test(ctx, h.cfg, h.obj, h.call(h.planFor(plan.Test)))
}

func (h *Runner) Rollback(ctx context.Context, toVersion int) error {
	p, err := h.rollbackPlan(toVersion)
	if err != nil {
		return err
	}
	defer h.observeHelm(p, time.Now())
	return h.canceled(action.Rollback(ctx, h.cfg, h.obj, toVersion, h.call(p)))
}

// ResumeWait finishes the afterHooks readiness wait of rel, which an
// earlier run of the controller left pending; see afterhooks.Resume.
func (h *Runner) ResumeWait(ctx context.Context, rel *releasev1.Release) (*releasev1.Release, error) {
	resumed, err := action.ResumeWait(ctx, h.cfg, h.call(h.resumePlan(rel)))
	return resumed, h.canceled(err)
}

func (h *Runner) Uninstall(ctx context.Context) error {
	p, err := h.uninstallPlan()
	if err != nil {
		return err
	}
	_, err = action.Uninstall(ctx, h.cfg, h.obj, h.call(p))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return h.hookCleanupFailed(err)
}

// event emits an event on the HelmRelease about what action did, when the
// runner has a recorder: recreated objects, hook cleanup. It carries the
// metadata of the attempt, as upstream's events about a release do.
func (h *Runner) event(action helmv2.Action, eventType, reason, msg string) {
	if h.recorder == nil {
		return
	}
	h.recorder.AnnotatedEventf(h.obj, nil, attemptEventMeta(h.obj), eventType, reason, action.String(), "%s", msg)
}

// Unlock marks a pending release failed in storage.
func (h *Runner) Unlock(_ context.Context, rel *releasev1.Release) error {
	// Upstream's wording, which `helm history` shows either way.
	rel.SetStatus(common.StatusFailed, fmt.Sprintf("Release unlocked from stale '%s' state", rel.Info.Status))
	if err := h.cfg.Releases.Update(rel); err != nil {
		return fmt.Errorf("updating release in storage: %w", err)
	}
	return nil
}

// Progress is how the runner tells the reconciler what a running action is
// doing: Report marks the Reconciling condition with msg, Update changes
// the status too (status.sequence); both patch the object. The reconciler
// implements it; calls may come from Helm's goroutines.
type Progress interface {
	Report(msg string)
	Update(change func(*v2.HelmRelease), msg string)
}

// NewRevision is the watch that abandons readiness waits when a new
// reconcile of the HelmRelease is queued (CancelHealthCheckOnNewRevision).
// Its methods must be safe on a nil receiver: a nil watch has no context
// and no trigger.
type NewRevision interface {
	// Context ends once a new revision is seen; nil without a watch.
	Context() context.Context
	// Trigger names what asked for the new reconcile, or is empty.
	Trigger() string
}

// Settings are what the reconciler decides for every runner, from flags,
// feature gates and the spec.
type Settings struct {
	// Config is the controller's action settings (feature gates).
	Config action.Config
	// RecreateMemory keeps what recreates did, shared by every reconcile
	// (see recreate.Memory); nil remembers nothing.
	RecreateMemory *recreate.Memory
	// DefaultHookOrder is the hook order of actions that leave their
	// waitStrategy unset (--default-wait-strategy, DefaultToAfterHooks).
	DefaultHookOrder v2.HookWaitStrategy
	// Recorder receives the events about what the actions did; may be nil.
	Recorder reconcile.EventRecorder
	// OverrideManagers are the --override-manager field managers.
	OverrideManagers []string
	// Logger receives Helm's logs.
	Logger slog.Handler

	// The rest is optional; an uninstall needs none of it.

	// Progress reports phases in the Reconciling condition.
	Progress Progress
	// DriftIgnore are the converted spec.driftDetection ignore rules.
	DriftIgnore drift.Rules
	// HealthChecks builds the readers of spec.healthCheckExprs.
	HealthChecks healthcheck.Readers
	// NewRevision abandons readiness waits for a new revision.
	NewRevision NewRevision
}

// New builds the Helm configuration of obj (storage and release
// namespaces) from factory, which reaches target, and the runner over it.
// What every plan of the release starts from is decided here, once (see
// newRunner).
func New(factory *action.ConfigFactory, target *connect.Target, obj *v2.HelmRelease, s Settings) (*Runner, error) {
	logs, writes := newHelmLogTail(), &action.WriteLog{}
	handler := s.Logger
	if handler == nil {
		handler = slog.DiscardHandler
	}
	cfg, err := factory.Build(obj.GetStorageNamespace(), obj.GetReleaseNamespace(),
		action.WithSlogHandler(logs.handler(handler)),
		action.WithStorageDriver(writes.Wrap),
		action.WithHookMarks(action.HookMarks(obj)))
	if err != nil {
		return nil, fmt.Errorf("could not build the Helm configuration: %w", err)
	}
	h := newRunner(cfg, obj, s)
	h.logs, h.writes, h.getter, h.target, h.fieldManager = logs, writes, factory.RESTClientGetter(), target, factory.FieldManager()
	if h.statusReaders, err = h.healthCheckReaders(s.HealthChecks); err != nil {
		return nil, err
	}
	return h, nil
}

// newRunner is the runner of obj over cfg with the per-release settings
// decided once: the release name, the hook marks and the release's one
// recreate policy.
func newRunner(cfg *helmaction.Configuration, obj *v2.HelmRelease, s Settings) *Runner {
	release := action.ReleaseName(obj)
	return &Runner{cfg: cfg, obj: obj, config: s.Config, recorder: s.Recorder, progress: s.Progress,
		overrideManagers: s.OverrideManagers, driftIgnore: s.DriftIgnore, newRevision: s.NewRevision,
		settings: plan.Settings{Release: release, DefaultHookOrder: s.DefaultHookOrder, Helm3Defaults: s.Config.UseHelm3Defaults,
			HookMarks: action.HookMarks(obj), Recreate: &recreate.Policy{
				Gate:    s.Config.RecreateImmutable,
				Release: recreate.Release{Name: release, Namespace: obj.GetReleaseNamespace()},
				Memory:  s.RecreateMemory,
			}}}
}

// Target is the cluster and identity the runner's actions reach.
func (h *Runner) Target() *connect.Target { return h.target }

// newRevisionContext is the context that abandons waits, nil without a
// watch.
func (h *Runner) newRevisionContext() context.Context {
	if h.newRevision == nil {
		return nil
	}
	return h.newRevision.Context()
}

// newRevisionTrigger names what asked for a new reconcile, or is empty.
func (h *Runner) newRevisionTrigger() string {
	if h.newRevision == nil {
		return ""
	}
	return h.newRevision.Trigger()
}

// canceled turns an action error caused by a new revision into a
// *reconcile.HealthCheckCanceledError; other errors pass unchanged.
func (h *Runner) canceled(err error) error {
	return reconcile.CanceledBy(h.newRevisionTrigger(), err)
}
