package plan

import (
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// DefaultTimeout is the action timeout when neither the action nor the spec
// sets one.
const DefaultTimeout = 5 * time.Minute

// Settings are what every plan of one release starts from: decided once
// per release by the runner.
type Settings struct {
	// Release is the Helm release name.
	Release string
	// DefaultHookOrder is the hook order of actions that leave their
	// waitStrategy unset (--default-wait-strategy, DefaultToAfterHooks).
	DefaultHookOrder v2.HookWaitStrategy
	// Helm3Defaults is the UseHelm3Defaults gate: where the spec leaves
	// the choice open, the legacy readiness strategy, a client-side
	// install, and post-renderers that do not see hooks.
	Helm3Defaults bool
	// Recreate is the release's recreate policy.
	Recreate *recreate.Policy
	// HookMarks is the mark of the release's hook objects, or empty.
	HookMarks string
}

// New decides the plan of obj's action v from its spec and s. A rollback
// or uninstall then follows its stored revision (see Follow).
func New(obj *v2.HelmRelease, v Verb, s Settings) Plan {
	p := Plan{Verb: v, Release: s.Release, HookMarks: s.HookMarks}
	readiness := readinessStrategy(obj, s.Helm3Defaults)
	var disableWait bool
	switch v {
	case Install:
		spec := obj.GetInstall()
		p.HookOrder = spec.GetWaitStrategy(s.DefaultHookOrder)
		p.Wait = Wait{Readiness: readiness, WaitForJobs: !spec.DisableWaitForJobs, Timeout: timeout(spec.Timeout, obj)}
		disableWait = spec.DisableWait
		p.Apply = &Apply{ServerSide: !s.Helm3Defaults}
		if spec.ServerSideApply != nil {
			p.Apply.ServerSide = *spec.ServerSideApply
		}
		p.PostRenderStrategy = postRenderStrategy(obj, s.Helm3Defaults)
	case Upgrade:
		spec := obj.GetUpgrade()
		p.HookOrder = spec.GetWaitStrategy(s.DefaultHookOrder)
		p.Wait = Wait{Readiness: readiness, WaitForJobs: !spec.DisableWaitForJobs, Timeout: timeout(spec.Timeout, obj)}
		disableWait, p.CleanupOnFail = spec.DisableWait, spec.CleanupOnFail
		p.Apply = applyMode(spec.ServerSideApply)
		p.PostRenderStrategy = postRenderStrategy(obj, s.Helm3Defaults)
	case Rollback:
		spec := obj.GetRollback()
		p.HookOrder = spec.GetWaitStrategy(s.DefaultHookOrder)
		p.Wait = Wait{Readiness: readiness, WaitForJobs: !spec.DisableWaitForJobs, Timeout: timeout(spec.Timeout, obj)}
		disableWait, p.CleanupOnFail = spec.DisableWait, spec.CleanupOnFail
		p.Apply = applyMode(spec.ServerSideApply)
	case Uninstall:
		spec := obj.GetUninstall()
		p.Wait = Wait{Readiness: readiness, Timeout: timeout(spec.Timeout, obj)}
		disableWait = spec.GetDisableWait()
	case Test:
		p.Wait = Wait{Timeout: timeout(obj.GetTest().Timeout, obj)}
		return p
	}
	p.Wait.Helm = readiness
	if disableWait || p.AfterHooks() {
		// afterHooks waits for readiness itself once the post hooks
		// passed; Helm only waits for its hooks. RollbackOnFailure is
		// never set, so Helm cannot turn hookOnly back into a wait.
		p.Wait.Helm = kube.HookOnlyStrategy
	}
	if v != Uninstall {
		p.Recreate = s.Recreate
	}
	if obj.IsOrdered() && (v == Install || v == Upgrade) {
		p.Ordering.From = FromSpec
	}
	p.Ordering.ReadinessTimeout = obj.GetReadinessTimeout()
	return p
}

// Follow returns p following rel, the revision a rollback restores or an
// uninstall removes (nil: it could not be read, and the action runs all at
// once; Helm says why it cannot roll back): its apply method, and its
// order when it was applied in order, whatever the HelmRelease says now.
func (p Plan) Follow(rel *releasev1.Release) (Plan, error) {
	if rel == nil {
		return p, nil
	}
	p.Revision = Revision{Version: rel.Version, ApplyMethod: rel.ApplyMethod}
	if p.Verb == Rollback {
		// Helm's rollback resolves auto from the revision it restores.
		p = p.startingFrom(rel.ApplyMethod)
	}
	if rel.Chart == nil {
		return p, nil
	}
	charts, sequenced, err := sequencing.Recorded(rel.Chart.Metadata)
	if err != nil {
		return p, fmt.Errorf("release %s v%d: %w", rel.Name, rel.Version, err)
	}
	if sequenced {
		p.Ordering.From, p.Ordering.Charts = FromRevision, charts
		if p.Verb == Uninstall {
			p.Ordering.Manifest = rel.Manifest
		}
	}
	return p, nil
}

// Upgrading returns the plan of an upgrade starting from last, the
// release's newest revision as the runner read it before the action (nil:
// none could be read): Helm's upgrade resolves serverSideApply auto from
// its apply method, whatever its status (Helm's Storage.Last).
func (p Plan) Upgrading(last *releasev1.Release) Plan {
	if last == nil || p.Verb != Upgrade {
		return p
	}
	return p.startingFrom(last.ApplyMethod)
}

// startingFrom resolves an auto apply as Helm does
// (getUpgradeServerSideValue in Helm's upgrade, the same in its
// rollback): server-side only after a revision applied server-side; a
// client-side revision, one from Helm 3 (no method) or none at all stays
// client-side.
func (p Plan) startingFrom(applyMethod string) Plan {
	if p.Apply == nil || !p.Apply.Auto {
		return p
	}
	// A copy: the plans a runner hands out share nothing.
	a := *p.Apply
	a.ServerSide = applyMethod == string(releasev1.ApplyMethodServerSideApply)
	p.Apply = &a
	return p
}

// applyMode is the Apply of an upgrade's or rollback's serverSideApply,
// before the revision it starts from is known: auto resolves as Helm does
// without one (client-side) until Upgrading or Follow reads it. A mode
// the API does not know is left to the action, which refuses it; it is
// planned as auto meanwhile.
func applyMode(m helmv2.ServerSideApplyMode) *Apply {
	switch m {
	case helmv2.ServerSideApplyEnabled:
		return &Apply{ServerSide: true}
	case helmv2.ServerSideApplyDisabled:
		return &Apply{ServerSide: false}
	}
	return &Apply{Auto: true}
}

// postRenderStrategy is spec.postRenderStrategy, else Helm 3's "nohooks"
// under its defaults, else Helm 4's "combined".
func postRenderStrategy(obj *v2.HelmRelease, helm3Defaults bool) helmv2.PostRenderStrategy {
	if s := obj.GetPostRenderStrategy(); s != "" {
		return s
	}
	if helm3Defaults {
		return helmv2.PostRenderStrategyNoHooks
	}
	return helmv2.PostRenderStrategyCombined
}

// readinessStrategy is Helm's strategy whenever something is waited for:
// spec.waitStrategy.name, else legacy under Helm 3's defaults, else the
// poller.
func readinessStrategy(obj *v2.HelmRelease, helm3Defaults bool) kube.WaitStrategy {
	switch obj.GetWaitStrategy() {
	case helmv2.WaitStrategyLegacy:
		return kube.LegacyStrategy
	case helmv2.WaitStrategyPoller, v2.WaitStrategyOrdered:
		return kube.StatusWatcherStrategy
	}
	if helm3Defaults {
		return kube.LegacyStrategy
	}
	return kube.StatusWatcherStrategy
}

// timeout picks the action's own timeout, else the spec's, else the
// default.
func timeout(own *metav1.Duration, obj *v2.HelmRelease) time.Duration {
	if own != nil {
		return own.Duration
	}
	if obj.Spec.Timeout != nil {
		return obj.Spec.Timeout.Duration
	}
	return DefaultTimeout
}
