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
	"github.com/afterhooks/helm-controller/internal/ownrevision"
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

func (r *Runner) releaseName() string { return r.settings.Release }

// RecorderWithLogs is rec with Helm's last log lines added to the failure
// events of the state machine.
func (r *Runner) RecorderWithLogs(rec reconcile.EventRecorder) reconcile.EventRecorder {
	if r.logs == nil {
		return rec
	}
	return logTailRecorder{EventRecorder: rec, tail: r.logs}
}

// RESTClientGetter is the release's target cluster and identity, for code
// beside the Helm actions (inventory, drift detection) that must look at
// the same objects the release applied.
func (r *Runner) RESTClientGetter() genericclioptions.RESTClientGetter { return r.getter }

// RESTConfig is the REST config of the target, impersonation included.
func (r *Runner) RESTConfig() (*rest.Config, error) { return r.getter.ToRESTConfig() }

// RESTMapper is the target cluster's REST mapper.
func (r *Runner) RESTMapper() (apimeta.RESTMapper, error) { return r.getter.ToRESTMapper() }

func (r *Runner) LastRelease(context.Context) (*releasev1.Release, error) {
	r.latestMu.Lock()
	defer r.latestMu.Unlock()
	seq := r.writes.Seq()
	if r.latest == nil || seq != r.latestSeq {
		rel, err := action.LastRelease(r.cfg, r.releaseName())
		if err != nil {
			return nil, err
		}
		r.latest, r.latestSeq = rel, seq
	}
	return action.CopyRelease(r.latest), nil
}

func (r *Runner) LastWritten() *releasev1.Release { return r.writes.Last() }

func (r *Runner) Install(ctx context.Context, chart *chartv2.Chart, values map[string]any, mark ownrevision.Mark) (*releasev1.Release, error) {
	obj := r.installObject(ctx)
	return r.render(ctx, r.planFor(plan.Install), func(c action.Call) (*releasev1.Release, error) {
		c.Mark = &mark
		return action.Install(ctx, r.cfg, obj, chart, values, c)
	})
}

func (r *Runner) Upgrade(ctx context.Context, chart *chartv2.Chart, values map[string]any, mark ownrevision.Mark) (*releasev1.Release, error) {
	return r.render(ctx, r.upgradePlan(), func(c action.Call) (*releasev1.Release, error) {
		c.Mark = &mark
		return action.Upgrade(ctx, r.cfg, r.obj, chart, values, c)
	})
}

// installObject is the HelmRelease an install maps onto Helm's options.
// Helm refuses to install over an uninstalled release whose history was
// kept unless told to replace it. The state machine installs only when
// nothing of the release is left (a failed one is upgraded, as upstream
// does), so that is the one case.
func (r *Runner) installObject(ctx context.Context) *v2.HelmRelease {
	obj := r.obj
	if last, err := r.LastRelease(ctx); err == nil && last.Info != nil && last.Info.Status == common.StatusUninstalled {
		obj = obj.DeepCopy()
		install := obj.GetInstall()
		install.Replace = true
		obj.Spec.Install = &install
	}
	return obj
}

// render runs the install or upgrade p plans with the post renderer
// (spec.postRenderers, spec.commonMetadata and the origin labels); invalid
// post renderers fail the action before Helm renders anything. Rollback
// needs none: it re-applies a stored, already post-rendered manifest. A
// failed wait is explained (explainWait).
func (r *Runner) render(ctx context.Context, p plan.Plan, run func(action.Call) (*releasev1.Release, error)) (*releasev1.Release, error) {
	if !p.Ordering.Ordered() {
		// The plan shown is the last ordered action's; this one is not.
		r.obj.Status.Sequence = nil
	}
	p, err := r.withPostRenderer(p)
	if err != nil {
		return nil, err
	}
	defer r.observeHelm(p, time.Now())
	rel, err := run(r.call(p))
	return rel, r.canceled(r.explainWait(ctx, p, rel, err))
}

// withPostRenderer adds to p the post renderer of install and upgrade.
func (r *Runner) withPostRenderer(p plan.Plan) (plan.Plan, error) {
	pr, err := postrender.Build(&r.obj.Spec.HelmReleaseSpec, r.obj.Name, r.obj.Namespace)
	if err != nil {
		return p, err
	}
	p.PostRenderer = pr
	return p, nil
}

// observeHelm records the duration of a beforeHooks Helm action (hooks,
// apply and readiness wait); afterHooks actions report their phases
// through the observer.
func (r *Runner) observeHelm(p plan.Plan, started time.Time) {
	if !p.AfterHooks() {
		observePhase(p.Verb, v2.BeforeHooks, "helm", started)
	}
}

func (r *Runner) Test(ctx context.Context) (*releasev1.Release, error) {
	return action.Test(ctx, r.cfg, r.obj, r.call(r.planFor(plan.Test)))
}

func (r *Runner) Rollback(ctx context.Context, toVersion int, mark ownrevision.Mark) error {
	p, err := r.rollbackPlan(toVersion)
	if err != nil {
		return err
	}
	defer r.observeHelm(p, time.Now())
	c := r.call(p)
	c.Mark = &mark
	return r.canceled(r.explainWait(ctx, p, nil, action.Rollback(ctx, r.cfg, r.obj, toVersion, c)))
}

// ResumeWait finishes the afterHooks readiness wait of rel, which an
// earlier run of the controller left pending; see afterhooks.Resume.
func (r *Runner) ResumeWait(ctx context.Context, rel *releasev1.Release) (*releasev1.Release, error) {
	p := r.resumePlan(rel)
	resumed, err := action.ResumeWait(ctx, r.cfg, r.call(p))
	return resumed, r.canceled(r.explainWait(ctx, p, resumed, err))
}

func (r *Runner) Uninstall(ctx context.Context) error {
	p, err := r.uninstallPlan()
	if err != nil {
		return err
	}
	_, err = action.Uninstall(ctx, r.cfg, r.obj, r.call(p))
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	return r.hookCleanupFailed(err)
}

// event emits an event on the HelmRelease about what action did, when the
// runner has a recorder: recreated objects, hook cleanup. It carries the
// metadata of the attempt, as upstream's events about a release do.
func (r *Runner) event(action helmv2.Action, eventType, reason, msg string) {
	if r.recorder == nil {
		return
	}
	r.recorder.AnnotatedEventf(r.obj, nil, attemptEventMeta(r.obj), eventType, reason, action.String(), "%s", msg)
}

// Unlock marks a pending release failed in storage.
func (r *Runner) Unlock(_ context.Context, rel *releasev1.Release) error {
	// Upstream's wording, which `helm history` shows either way.
	rel.SetStatus(common.StatusFailed, fmt.Sprintf("Release unlocked from stale '%s' state", rel.Info.Status))
	if err := r.cfg.Releases.Update(rel); err != nil {
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
	// Recreations keeps what recreates did, shared by every reconcile
	// (see recreate.Memory); nil remembers nothing.
	Recreations *recreate.Memory
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
	r := newRunner(nil, obj, s)
	cfg, err := factory.Build(obj.GetStorageNamespace(), obj.GetReleaseNamespace(),
		action.WithSlogHandler(logs.handler(handler)),
		action.WithStorageDriver(writes.Wrap),
		action.WithHookMarks(r.settings.HookMarks))
	if err != nil {
		return nil, fmt.Errorf("could not build the Helm configuration: %w", err)
	}
	r.cfg, r.logs, r.writes, r.getter, r.target, r.fieldManager = cfg, logs, writes, factory.RESTClientGetter(), target, factory.FieldManager()
	if r.statusReaders, err = r.healthCheckReaders(s.HealthChecks); err != nil {
		return nil, err
	}
	return r, nil
}

// newRunner is the runner of obj over cfg with the per-release settings
// decided once: the release name, the hook marks and the release's one
// recreate policy.
func newRunner(cfg *helmaction.Configuration, obj *v2.HelmRelease, s Settings) *Runner {
	release := v2.ReleaseName(obj)
	return &Runner{cfg: cfg, obj: obj, config: s.Config, recorder: s.Recorder, progress: s.Progress,
		overrideManagers: s.OverrideManagers, driftIgnore: s.DriftIgnore, newRevision: s.NewRevision,
		settings: plan.Settings{Release: release, DefaultHookOrder: s.DefaultHookOrder, Helm3Defaults: s.Config.UseHelm3Defaults,
			HookMarks: action.HookMarks(obj), Recreate: &recreate.Policy{
				Gate:    s.Config.RecreateImmutable,
				Release: recreate.Release{Name: release, Namespace: obj.GetReleaseNamespace()},
				Memory:  s.Recreations,
			}}}
}

// Target is the cluster and identity the runner's actions reach.
func (r *Runner) Target() *connect.Target { return r.target }

// newRevisionContext is the context that abandons waits, nil without a
// watch.
func (r *Runner) newRevisionContext() context.Context {
	if r.newRevision == nil {
		return nil
	}
	return r.newRevision.Context()
}

// newRevisionTrigger names what asked for a new reconcile, or is empty.
func (r *Runner) newRevisionTrigger() string {
	if r.newRevision == nil {
		return ""
	}
	return r.newRevision.Trigger()
}

// canceled turns an action error caused by a new revision into a
// *reconcile.HealthCheckCanceledError; other errors pass unchanged.
func (r *Runner) canceled(err error) error {
	return reconcile.CanceledBy(r.newRevisionTrigger(), err)
}
