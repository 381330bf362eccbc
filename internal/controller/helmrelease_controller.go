// Package controller holds the HelmRelease reconciler: it owns the object's
// lifecycle (finalizer, suspension, deletion, status bookkeeping) and hands the
// release work to the state machine.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	"github.com/fluxcd/pkg/runtime/object"
	"github.com/fluxcd/pkg/runtime/patch"
	"github.com/fluxcd/pkg/runtime/predicates"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/opencontainers/go-digest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	ctrlreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/redact"
)

// ControllerName is the name the controller registers with the manager and
// the default field manager of everything it applies.
const ControllerName = "helm-controller"

// metricsName names the controller in controller-runtime's metrics and logs
// (the controller and name labels of controller_runtime_* and workqueue_*).
// Upstream leaves it at controller-runtime's default, the lowercase kind;
// dashboards filter on it.
const metricsName = "helmrelease"

// HelmReleaseReconciler reconciles HelmRelease objects.
type HelmReleaseReconciler struct {
	client.Client
	APIReader client.Reader
	// EventRecorder records Kubernetes events and sends them, with their
	// Flux 2.10 action, to notification-controller.
	EventRecorder events.Recorder
	Metrics       helper.Metrics
	FieldManager  string
	// statusWriter, when set (SetMetadataClient), sends the writes of the
	// handled request alone; without it they go through Client.
	statusWriter statusWriter

	DisableChartDigestTracking bool
	DefaultToRetryOnFailure    bool
	// DefaultHookOrder is the hook order (waitStrategy) of install, upgrade and
	// rollback for HelmReleases that leave it unset (afterHooks with the
	// DefaultToAfterHooks feature gate); empty means beforeHooks.
	DefaultHookOrder       v2.HookWaitStrategy
	NoCrossNamespaceRef    bool
	WatchExternalArtifacts bool
	// DirectSourceFetch reads source objects from the API server instead of
	// the cache (the feature gate of the same name).
	DirectSourceFetch bool
	// RequeueDependency is how soon a HelmRelease waiting for its
	// dependencies is checked again.
	RequeueDependency time.Duration
	// AdditiveCELDependencyCheck is the feature gate of the same name.
	AdditiveCELDependencyCheck bool
	// ConfigWatch selects the ConfigMaps and Secrets whose changes
	// reconcile the HelmReleases that use them in valuesFrom.
	ConfigWatch ConfigWatchOptions
	// CancelHealthCheckOnNewRevision is the feature gate of the same name:
	// a readiness wait is abandoned, and its revision failed, as soon as a
	// change queues a new reconcile of the HelmRelease (see
	// newRevisionWatch).
	CancelHealthCheckOnNewRevision bool
	// SnapshotDigestAlgorithm hashes the digests of status.history and
	// status.lastAttemptedConfigDigest (--snapshot-digest-algo); empty
	// means sha256.
	SnapshotDigestAlgorithm digest.Algorithm

	// Charts downloads and caches chart artifacts.
	Charts *chartsource.Source
	// Helm builds Helm configurations per release.
	Helm *action.ConfigFactory
	// Targets builds each release's cluster connection (spec.kubeConfig,
	// impersonation); Helm derives per-release factories from it.
	Targets *connect.Builder
	// ActionConfig carries feature-gate effects on Helm actions.
	ActionConfig action.Config
	// Recreations keeps what recreates did, shared by every reconcile
	// of every release (see recreate.Memory).
	Recreations *recreate.Memory
	// OverrideManagers are field managers (--override-manager) whose
	// fields drift correction takes over, so their changes count as drift.
	OverrideManagers []string
	// Redactions hold, per HelmRelease, the values its Secrets gave; no
	// condition message, event or logged error carries them. Set up by
	// SetupWithManager.
	Redactions *redact.Registry

	// inventories keeps the inventory of each release's record listed
	// last.
	inventories inventories
	// appliedSources keeps what the chart template's source object was
	// when an apply last found it unchanged.
	appliedSources appliedSources
}

// HelmReleaseReconcilerOptions tunes the controller's work queue.
type HelmReleaseReconcilerOptions struct {
	RateLimiter             workqueue.TypedRateLimiter[ctrlreconcile.Request]
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=helm.toolkit.fluxcd.io,resources=helmreleases/finalizers,verbs=get;create;update;patch;delete
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=helmcharts;ocirepositories;externalartifacts,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get;impersonate
// +kubebuilder:rbac:groups="",resources=serviceaccounts/token,verbs=create

// SetupWithManager registers the reconciler with the manager.
func (r *HelmReleaseReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts HelmReleaseReconcilerOptions) error {
	if r.FieldManager == "" {
		r.FieldManager = ControllerName
	}
	if r.Redactions == nil {
		r.Redactions = redact.NewRegistry()
		r.EventRecorder = redact.Recorder{Recorder: r.EventRecorder, Registry: r.Redactions}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &v2.HelmRelease{}, helmv2.SourceIndexKey, indexBySource); err != nil {
		return fmt.Errorf("indexing HelmReleases by source: %w", err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(metricsName).
		For(&v2.HelmRelease{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicates.ReconcileRequestedPredicate{}, planRequestedPredicate{}),
		))
	for _, src := range watchedSources(r.WatchExternalArtifacts) {
		b = b.Watches(src.object, handler.EnqueueRequestsFromMapFunc(r.requestsForSource(src.kind)),
			builder.WithPredicates(artifactChanged{}))
	}
	b, err := r.setupConfigWatches(ctx, mgr, b, r.ConfigWatch)
	if err != nil {
		return err
	}
	return b.WithOptions(controller.Options{
		RateLimiter:             opts.RateLimiter,
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
	}).Complete(r)
}

// SetMetadataClient makes the reconcile's write of a handled request alone
// (most writes of a settled fleet) go through c, client-go's metadata
// client of the controller's API server, instead of Client.
func (r *HelmReleaseReconciler) SetMetadataClient(c metadata.Interface) {
	r.statusWriter = newMetadataStatusWriter(c)
}

// Reconcile brings one HelmRelease closer to its desired state.
func (r *HelmReleaseReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	start := time.Now()
	log := ctrl.LoggerFrom(ctx)

	obj := &v2.HelmRelease{}
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patcher := newReleasePatcher(obj, r.Client, r.FieldManager)
	if r.statusWriter != nil {
		patcher.status = r.statusWriter
	}

	defer func() {
		// Waiting is not an error to retry with backoff: the result says
		// when to look again. It is not a finished reconcile either.
		waiting := errors.Is(retErr, errWaiting)
		if waiting {
			retErr = nil
		}
		// A terminal error (a stall, as upstream returns one) ends the
		// reconcile of this generation: controller-runtime counts and
		// logs it, and does not retry.
		finished := retErr == nil || errors.Is(retErr, ctrlreconcile.TerminalError(nil))
		if err := r.finalizeStatus(ctx, patcher, obj, finished && !waiting); err != nil {
			retErr = errors.Join(retErr, err)
		} else {
			r.awaitCacheSync(ctx, obj, patcher)
		}
		retErr = r.Redactions.Error(req.NamespacedName, retErr)
		r.Metrics.RecordDuration(ctx, obj, start)
	}()

	if !obj.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, obj)
	}

	// The finalizer goes on before anything touches the cluster, so a
	// deletion can never leave a release behind.
	if !controllerutil.ContainsFinalizer(obj, helmv2.HelmReleaseFinalizer) {
		controllerutil.AddFinalizer(obj, helmv2.HelmReleaseFinalizer)
		if err := patcher.Patch(ctx, obj, patch.WithFieldOwner(r.FieldManager)); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to add finalizer: %w", err)
		}
	}

	// Of Flux's per-object metrics only the reconcile duration is recorded,
	// as upstream v1.6 does: gotk_suspend_status and gotk_reconcile_condition
	// are no longer served by Flux's controllers (kube-state-metrics reads
	// suspend and conditions from the objects), and TestMetricsMatchUpstream
	// holds us to what upstream serves.
	if obj.Spec.Suspend {
		log.Info("reconciliation is suspended for this object")
		return ctrl.Result{}, nil
	}

	if len(obj.Spec.DependsOn) > 0 {
		// As upstream, the chart template's HelmChart is made before the
		// dependencies are checked: its chart is fetched while the release
		// waits, and status.helmChart names it.
		if err := r.syncChartTemplate(ctx, obj); err != nil {
			return r.fail(obj, helmv2.ActionResolveSource, helmv2.ArtifactFailedReason, err)
		}
	}
	if result, stop, err := r.waitForDependencies(ctx, obj); stop {
		return result, err
	}
	return r.reconcileRelease(ctx, patcher, obj)
}

// sourceArtifact returns the artifact of the source the HelmRelease points at.
func (r *HelmReleaseReconciler) sourceArtifact(ctx context.Context, obj *v2.HelmRelease) (*meta.Artifact, error) {
	source, key, err := r.sourceFor(obj)
	if err != nil {
		return nil, err
	}
	kind := sourceKind(obj)
	chartTemplate := obj.Spec.Chart != nil
	reader, direct := r.sourceReader(), r.DirectSourceFetch
	if chartTemplate && obj.Status.ObservedGeneration != obj.Generation {
		// The chart template's HelmChart may just have been changed by
		// reconcileChartTemplate, and the cache not have seen it yet: its
		// old spec, reconciled, would pass the old chart's artifact off as
		// the new spec's. Until the generation is reconciled, the API
		// server says whether source-controller has caught up.
		reader, direct = r.APIReader, true
	}
	err = reader.Get(ctx, key, source)
	if apierrors.IsNotFound(err) && chartTemplate && !direct {
		// The HelmChart of a chart template was applied moments ago, in
		// this reconcile: a new one is usually not in the cache yet. Only
		// the API server can tell whether it is missing.
		err = r.APIReader.Get(ctx, key, source)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("could not get source %s '%s': not found", kind, key)
		}
		return nil, fmt.Errorf("could not get source %s '%s': %w", kind, key, err)
	}
	if msg, failed := sourceNotReady(source, kind); msg != "" {
		return nil, &sourceNotReadyError{msg: msg, sourceFailed: failed}
	}
	return source.GetArtifact(), nil
}

// SourceNotReadyReason: the chart's source exists but has nothing usable
// yet (upstream's reason); the source watch brings the HelmRelease back.
const SourceNotReadyReason = "SourceNotReady"

// sourceNotReadyError is a source that is not ready to be used.
// sourceFailed: the source reports a failure of its own (a chart version
// that does not exist, a repository it cannot reach), as opposed to not
// having got to it yet.
type sourceNotReadyError struct {
	msg          string
	sourceFailed bool
}

func (e *sourceNotReadyError) Error() string { return e.msg }

// sourceNotReady says why src of the given kind is not ready to be used,
// as upstream decides it, or "" when it is: its latest generation is not
// reconciled yet (the Ready message tells why when Ready is False), it is
// stalled, or it has no artifact. A failing source that still serves an
// artifact of its current generation is used. failed tells whether the
// reason is a failure the source reports itself (its Ready=False or
// Stalled message).
func sourceNotReady(src sourceObject, kind string) (msg string, failed bool) {
	if _, external := src.(*sourcev1.ExternalArtifact); external {
		// Its producer writes its status, with no observedGeneration: as
		// upstream, the artifact alone decides.
		if src.GetArtifact() == nil {
			return fmt.Sprintf("%s '%s/%s' is not ready: does not have an artifact", kind, src.GetNamespace(), src.GetName()), false
		}
		return "", false
	}
	why := ""
	getter, hasConditions := src.(conditions.Getter)
	observed, err := statusObservedGeneration(src)
	switch {
	case err != nil:
		why = err.Error()
	case src.GetGeneration() != observed:
		why = "latest generation of object has not been reconciled"
		if hasConditions && conditions.IsFalse(getter, meta.ReadyCondition) {
			why, failed = conditions.GetMessage(getter, meta.ReadyCondition), true
		}
	case hasConditions && conditions.IsStalled(getter):
		why, failed = conditions.GetMessage(getter, meta.StalledCondition), true
	case src.GetArtifact() == nil:
		why = "does not have an artifact"
	default:
		return "", false
	}
	return fmt.Sprintf("%s '%s/%s' is not ready: %s", kind, src.GetNamespace(), src.GetName(), why), failed
}

// statusObservedGeneration is src's status.observedGeneration, 0 when it
// was never reconciled. The source kinds a chart comes from are read from
// their types: Flux's generic helper converts the whole object to
// unstructured to find the field, which was a sixth of what a reconcile
// that finds its release in sync allocated.
func statusObservedGeneration(src sourceObject) (int64, error) {
	switch s := src.(type) {
	case *sourcev1.HelmChart:
		return s.Status.ObservedGeneration, nil
	case *sourcev1.OCIRepository:
		return s.Status.ObservedGeneration, nil
	}
	observed, err := object.GetStatusObservedGeneration(src)
	if errors.Is(err, object.ErrObservedGenerationNotFound) {
		return 0, nil
	}
	return observed, err
}

// sourceReader reads source objects: from the API server with
// DirectSourceFetch, else from the cache.
func (r *HelmReleaseReconciler) sourceReader() client.Reader {
	if r.DirectSourceFetch {
		return r.APIReader
	}
	return r.Client
}

// sourceKind names the kind of source the HelmRelease reads its chart from.
func sourceKind(obj *v2.HelmRelease) string {
	if obj.Spec.ChartRef != nil {
		return obj.Spec.ChartRef.Kind
	}
	return obj.GetHelmChartTemplateReference().Kind
}

type sourceObject interface {
	client.Object
	GetArtifact() *meta.Artifact
}

// sourceFor returns an empty object of the referenced source kind and its key.
func (r *HelmReleaseReconciler) sourceFor(obj *v2.HelmRelease) (sourceObject, client.ObjectKey, error) {
	if obj.Spec.ChartRef == nil {
		// A chart template is served by the HelmChart or OCIRepository the
		// controller makes from it.
		ref := obj.GetHelmChartTemplateReference()
		if ref.Kind == sourcev1.OCIRepositoryKind {
			return &sourcev1.OCIRepository{}, ref.GetObjectKey(), nil
		}
		return &sourcev1.HelmChart{}, ref.GetObjectKey(), nil
	}

	ref := obj.Spec.ChartRef
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = obj.Namespace
	}
	if r.NoCrossNamespaceRef && key.Namespace != obj.Namespace {
		return nil, key, fmt.Errorf("cannot access %s '%s': cross-namespace references are disabled (--no-cross-namespace-refs)", ref.Kind, key)
	}
	switch ref.Kind {
	case sourcev1.ExternalArtifactKind:
		if !r.WatchExternalArtifacts {
			return nil, key, fmt.Errorf("cannot access ExternalArtifact '%s': the ExternalArtifact feature gate is off "+
				"(--feature-gates=ExternalArtifact=true turns it on)", key)
		}
		return &sourcev1.ExternalArtifact{}, key, nil
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}, key, nil
	case sourcev1.HelmChartKind:
		return &sourcev1.HelmChart{}, key, nil
	default:
		return nil, key, fmt.Errorf("unsupported chartRef kind '%s'", ref.Kind)
	}
}

// reconcileDelete uninstalls the release (unless suspended), removes the
// HelmChart made from a chart template and then the finalizer.
func (r *HelmReleaseReconciler) reconcileDelete(ctx context.Context, obj *v2.HelmRelease) error {
	if !controllerutil.ContainsFinalizer(obj, helmv2.HelmReleaseFinalizer) {
		return nil
	}
	if !obj.Spec.Suspend {
		runner, err := r.uninstallRunner(ctx, obj)
		if err != nil {
			return err
		}
		if runner != nil {
			machine := &reconcile.Machine{Helm: runner, Recorder: runner.RecorderWithLogs(r.EventRecorder)}
			if err := machine.Uninstall(ctx, &reconcile.Request{Object: obj}); err != nil {
				return err
			}
		}
		if err := r.deleteChartTemplate(ctx, obj); err != nil {
			return err
		}
	} else {
		// As upstream: a suspended HelmRelease leaves what it made alone,
		// the HelmChart of its chart template included.
		ctrl.LoggerFrom(ctx).Info("deleting a suspended HelmRelease: the Helm release and its HelmChart are left in place")
	}
	r.Charts.Forget(client.ObjectKeyFromObject(obj))
	r.inventories.forget(client.ObjectKeyFromObject(obj))
	r.appliedSources.forget(client.ObjectKeyFromObject(obj))
	r.Targets.Forget(helmv2.HelmReleaseKind, obj.Namespace, obj.Name)
	defer r.Redactions.Set(client.ObjectKeyFromObject(obj), nil)
	controllerutil.RemoveFinalizer(obj, helmv2.HelmReleaseFinalizer)
	return nil
}

// ownedConditions are the conditions this controller writes; the patch helper
// resolves conflicts on them in the controller's favour.
var ownedConditions = []string{
	meta.ReadyCondition,
	meta.ReconcilingCondition,
	meta.StalledCondition,
	helmv2.ReleasedCondition,
	helmv2.TestSuccessCondition,
	helmv2.RemediatedCondition,
	helmv2.DriftedCondition,
}

// statusWriteTimeout bounds the final status write of a reconcile, which
// outlives a cancelled reconcile context.
const statusWriteTimeout = 10 * time.Second

// errWaiting ends a reconcile that waits for something outside the
// HelmRelease (its chart source, its dependencies), to be looked at again
// after the returned result's RequeueAfter. As upstream, such a reconcile
// does not observe the generation: kstatus tools read the HelmRelease as
// in progress, not as failed.
var errWaiting = errors.New("waiting for a prerequisite")

// finalizeStatus writes the outcome of a reconcile back to the API server.
// finished says the reconcile of this generation completed (successfully,
// or with a failure recorded in the status).
func (r *HelmReleaseReconciler) finalizeStatus(ctx context.Context, patcher *releasePatcher, obj *v2.HelmRelease, finished bool) error {
	if v, ok := meta.ReconcileAnnotationValue(obj.GetAnnotations()); ok {
		obj.Status.LastHandledReconcileAt = v
	}

	deleted := !obj.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(obj, helmv2.HelmReleaseFinalizer)
	if !deleted && finished && controllerutil.ContainsFinalizer(obj, helmv2.HelmReleaseFinalizer) {
		// A suspended generation is handled by leaving the release alone,
		// as upstream counts it: a Kustomization's health check and a
		// dependsOn on it pass. Its conditions keep the generation they
		// were set for, so Ready still tells which one it describes.
		obj.Status.ObservedGeneration = obj.Generation
		if !obj.Spec.Suspend && !conditions.IsUnknown(obj, meta.ReadyCondition) {
			conditions.Delete(obj, meta.ReconcilingCondition)
		}
	}

	// A reconcile interrupted by shutdown still records what it did (a new
	// revision in the history, a failure counted): losing that would make
	// the next run misread the release. The write gets a moment of its own.
	writeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusWriteTimeout)
	defer cancel()
	redactConditions(obj, r.Redactions)
	err := patcher.PatchFinal(writeCtx, obj, patch.WithOwnedConditions{Conditions: ownedConditions}, patch.WithFieldOwner(r.FieldManager))
	if err != nil && deleted {
		// Removing the finalizer removed the object, so the status write
		// that follows finds it gone. The patch helper returns an
		// aggregate of its writes' errors, which apierrors.IsNotFound
		// does not look into; FilterOut does (as upstream).
		err = kerrors.FilterOut(err, apierrors.IsNotFound)
	}
	if err != nil {
		return fmt.Errorf("failed to patch HelmRelease status: %w", err)
	}
	return nil
}
