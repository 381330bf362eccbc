package action

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Options carries what the caller decides outside the HelmRelease spec:
// feature-gate effects and objects built from the spec elsewhere.
type Options struct {
	// UseHelm3Defaults applies Helm 3's defaults where the spec leaves the
	// choice open (the UseHelm3Defaults feature gate); see the package doc.
	UseHelm3Defaults bool

	// AllowDNSLookups lets templates resolve host names (the
	// AllowDNSLookups feature gate).
	AllowDNSLookups bool

	// PostRenderer runs on the rendered manifests of install and upgrade.
	// The caller builds it from spec.postRenderers and spec.commonMetadata;
	// nil means none.
	PostRenderer postrenderer.PostRenderer

	// WaitContext, when set, bounds Helm's readiness waits (Wait and
	// WaitWithJobs: the wait for the release's resources) in addition to
	// their timeouts, so a caller can abandon a wait (the
	// CancelHealthCheckOnNewRevision feature gate). Hook watches and the
	// wait for deletions are not bound by it: interrupting a running hook
	// would leave its side effects half done. When it is nil only the
	// action's timeout bounds the waits. Helm passes it to its kstatus-based
	// waiter; its legacy waiter ignores it. The ctx passed to each function
	// is not used for this: cancelling it makes Install and Upgrade return
	// early while Helm finishes the action in the background, as Helm does.
	WaitContext context.Context

	// HookOnlyWait runs install, upgrade and rollback with Helm's hookOnly
	// wait strategy: Helm waits for its hooks but not for the release's
	// resources, whatever the spec says. waitStrategy afterHooks uses it and
	// waits for readiness itself afterwards (see InstallWait). Timeouts and
	// disableWaitForJobs still apply to the hooks as usual. RollbackOnFailure
	// is never set, so Helm cannot turn hookOnly back into a resource wait.
	HookOnlyWait bool

	// WaitStrategy is the hook wait strategy of this install, upgrade or
	// rollback, as the caller decided it (internal/runner decides it once
	// per action from the spec and --default-wait-strategy); empty means
	// beforeHooks. AfterHooks runs the action through internal/afterhooks.
	WaitStrategy v2.HookWaitStrategy

	// AfterHooksObserver hears the phases of afterHooks actions (events,
	// progress, metrics); may be nil.
	AfterHooksObserver afterhooks.Observer

	// SequenceObserver hears each batch of an ordered action (waitStrategy
	// name ordered) start, wait and end, and SequenceWarn each
	// misconfiguration the chart's ordering annotations have; both may be
	// nil.
	SequenceObserver func(sequencing.Progress)
	SequenceWarn     func(string)
	// SequencePlanned hears the plan of each ordered apply or uninstall
	// before it starts; it may be nil.
	SequencePlanned func(sequencing.Planned)
	// SequenceReadinessTimeout bounds the wait of each batch of an
	// ordered action (spec.waitStrategy.readinessTimeout); zero leaves
	// only the action's timeout.
	SequenceReadinessTimeout time.Duration

	// RecreateImmutable is the RecreateImmutableResources feature gate:
	// objects of the built-in kinds it covers may be recreated when the
	// API server refuses to update them in place, without the
	// helm.toolkit.fluxcd.io/force: enabled annotation (see
	// internal/recreate). An action's force setting plays no part.
	RecreateImmutable bool

	// RecreateMemory keeps what drift corrections recreated, so an object
	// refused again right after its recreate is reported, not recreated
	// in a loop; shared by every reconcile. Nil remembers nothing.
	RecreateMemory *recreate.Memory

	// RecreateRolledBackFrom is set by Rollback: the consents of the
	// revision it rolls back from (recreate.Policy.RolledBackFrom).
	RecreateRolledBackFrom recreate.Consents

	// RecreateObserver hears each object an upgrade or rollback
	// recreated; may be nil.
	RecreateObserver func(recreate.Recreated)

	// HookResourcesDeleted hears the objects ("Kind/namespace/name") an
	// uninstall with spec.uninstall.deleteHookResources deleted, when
	// there were any, even if others failed; may be nil.
	HookResourcesDeleted func(deleted []string)

	// HookResourcesLeft hears the objects that same cleanup found under
	// the names of the release's hooks and did not delete, each followed
	// by the reason in parentheses, when there were any; may be nil.
	HookResourcesLeft func(left []string)

	// StatusReaders judge the readiness of the kinds they support before
	// kstatus' built-in rules do: spec.healthCheckExprs, compiled by
	// internal/healthcheck. Helm's kstatus-based waiter uses them for the
	// release's resources and for hooks of those kinds; the legacy waiter
	// ignores them, as upstream documents (health check expressions need
	// the poller strategy).
	StatusReaders []engine.StatusReader
}

// Wait is the readiness wait an action would run when it waits for the
// release's resources.
type Wait struct {
	// Strategy is kube.StatusWatcherStrategy or kube.LegacyStrategy, from
	// spec.waitStrategy and UseHelm3Defaults.
	Strategy kube.WaitStrategy
	// WaitForJobs is false when the action sets disableWaitForJobs.
	WaitForJobs bool
	// Timeout is the action's timeout (its own, else spec.timeout, else
	// DefaultTimeout).
	Timeout time.Duration
}

// InstallWait returns the readiness wait of obj's install as Helm would
// run it without HookOnlyWait (and without disableWait).
func InstallWait(obj *v2.HelmRelease, o Options) Wait {
	spec := obj.GetInstall()
	return readinessWait(obj, spec.Timeout, spec.DisableWaitForJobs, o)
}

// UpgradeWait is InstallWait for the upgrade.
func UpgradeWait(obj *v2.HelmRelease, o Options) Wait {
	spec := obj.GetUpgrade()
	return readinessWait(obj, spec.Timeout, spec.DisableWaitForJobs, o)
}

// RollbackWait is InstallWait for the rollback.
func RollbackWait(obj *v2.HelmRelease, o Options) Wait {
	spec := obj.GetRollback()
	return readinessWait(obj, spec.Timeout, spec.DisableWaitForJobs, o)
}

func readinessWait(obj *v2.HelmRelease, timeout *metav1.Duration, disableWaitForJobs bool, o Options) Wait {
	return Wait{
		Strategy:    readinessStrategy(obj, o),
		WaitForJobs: !disableWaitForJobs,
		Timeout:     actionTimeout(timeout, obj),
	}
}

// DefaultTimeout is the action timeout when neither the action nor the spec
// sets one.
const DefaultTimeout = 5 * time.Minute

// maxReleaseNameLength is Helm's limit for release names.
const maxReleaseNameLength = 53

// ReleaseName returns the Helm release name of obj: spec.releaseName, or
// '[targetNamespace-]name', shortened when longer than Helm allows.
func ReleaseName(obj *v2.HelmRelease) string {
	return shortenReleaseName(obj.GetReleaseName())
}

// shortenReleaseName keeps names of up to 53 characters. Longer ones become
// their first 40 characters, a dash and the first 12 hex characters of the
// SHA-256 of the whole name: 53 characters, stable, and unlikely to collide.
func shortenReleaseName(name string) string {
	if len(name) <= maxReleaseNameLength {
		return name
	}
	const hashLen = 12
	sum := sha256.Sum256([]byte(name))
	return name[:maxReleaseNameLength-hashLen-1] + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// actionTimeout picks the action's own timeout, else the spec's, else the
// default.
func actionTimeout(own *metav1.Duration, obj *v2.HelmRelease) time.Duration {
	if own != nil {
		return own.Duration
	}
	if obj.Spec.Timeout != nil {
		return obj.Spec.Timeout.Duration
	}
	return DefaultTimeout
}

// waitStrategy maps disableWait, Options.HookOnlyWait and spec.waitStrategy
// to Helm's strategy.
func waitStrategy(obj *v2.HelmRelease, disableWait bool, o Options) kube.WaitStrategy {
	if disableWait || o.HookOnlyWait {
		return kube.HookOnlyStrategy
	}
	return readinessStrategy(obj, o)
}

// readinessStrategy is the strategy used when something must be waited for.
func readinessStrategy(obj *v2.HelmRelease, o Options) kube.WaitStrategy {
	switch obj.GetWaitStrategy() {
	case helmv2.WaitStrategyLegacy:
		return kube.LegacyStrategy
	case helmv2.WaitStrategyPoller, v2.WaitStrategyOrdered:
		return kube.StatusWatcherStrategy
	}
	if o.UseHelm3Defaults {
		return kube.LegacyStrategy
	}
	return kube.StatusWatcherStrategy
}

// waitOptions passes Options.WaitContext and Options.StatusReaders to
// Helm's waiters.
func waitOptions(o Options) []kube.WaitOption {
	var opts []kube.WaitOption
	if o.WaitContext != nil {
		opts = append(opts, kube.WithWaitMethodContext(o.WaitContext), kube.WithWaitWithJobsMethodContext(o.WaitContext))
	}
	if len(o.StatusReaders) > 0 {
		opts = append(opts, kube.WithKStatusReaders(o.StatusReaders...))
	}
	return opts
}

// postRenderStrategy maps spec.postRenderStrategy.
func postRenderStrategy(obj *v2.HelmRelease, o Options) (helmaction.PostRenderStrategy, error) {
	switch s := obj.GetPostRenderStrategy(); s {
	case helmv2.PostRenderStrategyCombined:
		return helmaction.PostRenderStrategyCombined, nil
	case helmv2.PostRenderStrategySeparate:
		return helmaction.PostRenderStrategySeparate, nil
	case helmv2.PostRenderStrategyNoHooks:
		return helmaction.PostRenderStrategyNoHooks, nil
	case "":
		if o.UseHelm3Defaults {
			return helmaction.PostRenderStrategyNoHooks, nil
		}
		return helmaction.PostRenderStrategyCombined, nil
	default:
		return "", fmt.Errorf("unknown postRenderStrategy %q", s)
	}
}

// ssaMode maps an upgrade or rollback serverSideApply mode to Helm's string.
func ssaMode(m helmv2.ServerSideApplyMode) (string, error) {
	switch m {
	case helmv2.ServerSideApplyEnabled:
		return "true", nil
	case helmv2.ServerSideApplyDisabled:
		return "false", nil
	case helmv2.ServerSideApplyAuto, "":
		return "auto", nil
	default:
		return "", fmt.Errorf("unknown serverSideApply mode %q", m)
	}
}

// resolveSSA tells what Helm will do for a "true"/"false"/"auto" setting
// given the apply method stored on the release it decides "auto" from.
func resolveSSA(mode, storedApplyMethod string) bool {
	switch mode {
	case "true":
		return true
	case "false":
		return false
	default:
		return storedApplyMethod == string(releasev1.ApplyMethodServerSideApply)
	}
}

// forceFlags returns Helm's ForceConflicts and ForceReplace for an apply:
// server-side apply always forces conflicts and cannot replace; client-side
// apply replaces objects when force is set. Helm rejects any other pair.
func forceFlags(serverSide, force bool) (forceConflicts, forceReplace bool) {
	if serverSide {
		return true, false
	}
	return false, force
}

// errNilObject guards the exported functions.
var errNilObject = errors.New("action: nil HelmRelease")
