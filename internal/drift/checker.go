package drift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	ssanormalize "github.com/fluxcd/pkg/ssa/normalize"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// Cluster is how the checker reaches the cluster of a release: the REST
// client getter of the release's Helm configuration satisfies it, so drift
// is looked for (and corrected) exactly where, and as whom, Helm deploys.
type Cluster interface {
	ToRESTConfig() (*rest.Config, error)
	ToRESTMapper() (apimeta.RESTMapper, error)
}

// Options configures a Checker.
type Options struct {
	// FieldManager is the field manager Helm applies the release with. The
	// dry-run and the correction apply as this manager, so the fields Helm
	// owns are the ones compared and restored.
	FieldManager string
	// Ignore are the ignore rules, as IgnoreRules returns them.
	Ignore Rules
	// OverrideManagers are field managers (e.g. kubectl-edit) whose fields
	// are handed over to FieldManager before comparing. A field such a
	// manager added then counts as drift and a correction removes it;
	// without the hand-over server-side apply leaves it in place. This
	// writes to managedFields, so only pass managers when correcting.
	OverrideManagers []string
	// Recreate decides which objects a correction refused for an
	// immutable field may be recreated (see internal/recreate), within
	// RecreateTimeout each; Dependents finds what such an object owns (nil
	// refuses every recreate); OnRecreate, when set, hears each one.
	Recreate        recreate.Policy
	RecreateTimeout time.Duration
	Dependents      recreate.Dependents
	OnRecreate      func(recreate.Recreated)
}

// exclusion marks objects (by label or annotation, on the manifest or in
// the cluster) that drift detection leaves alone.
var exclusion = map[string]string{helmv2.DriftDetectionMetadataKey: helmv2.DriftDetectionDisabledValue}

// Checker compares the objects of a release manifest with the cluster and
// restores them.
type Checker struct {
	client client.Client
	// dryRun can only dry-run; comparisons go through it so they cannot
	// change anything by mistake.
	dryRun client.Client
	mapper apimeta.RESTMapper
	opts   Options
}

// NewChecker returns a Checker that works through cluster.
func NewChecker(cluster Cluster, opts Options) (*Checker, error) {
	if opts.FieldManager == "" {
		return nil, errors.New("drift: empty field manager")
	}
	cfg, err := cluster.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("drift: REST config: %w", err)
	}
	mapper, err := cluster.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("drift: REST mapper: %w", err)
	}
	// One transport for both clients: a checker lives for one reconcile.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("drift: HTTP client: %w", err)
	}
	c, err := client.New(cfg, client.Options{Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, fmt.Errorf("drift: Kubernetes client: %w", err)
	}
	dryRun, err := client.New(cfg, client.Options{Mapper: mapper, HTTPClient: httpClient, DryRun: ptr.To(true)})
	if err != nil {
		return nil, fmt.Errorf("drift: dry-run Kubernetes client: %w", err)
	}
	return &Checker{client: c, dryRun: dryRun, mapper: mapper, opts: opts}, nil
}

// Detect compares every object of rel's manifest with the cluster by a
// server-side apply dry-run and returns one diff per object. Objects it
// could not compare are left out and reported in the error, so a caller
// can still act on the drift it did find. A Job that deletes itself once
// finished and is gone is left out too (see withoutSelfDeletedJobs).
func (c *Checker) Detect(ctx context.Context, rel *releasev1.Release) (jsondiff.DiffSet, error) {
	set, _, err := c.DetectRefused(ctx, rel)
	return withoutSelfDeletedJobs(set), err
}

// withoutSelfDeletedJobs drops from set the Jobs with
// spec.ttlSecondsAfterFinished that are not in the cluster. Kubernetes
// deletes such a Job once it finished, as its manifest asks: its absence
// is the end of its run, not drift. Counted as drift, a correction would
// create it again and run its work once more at every check (a migration,
// a backup), and the release would be Ready while that run goes on. An
// upgrade still creates it again, as Helm does with any object it does not
// find; DetectRefused, which plans what an upgrade does, keeps it.
func withoutSelfDeletedJobs(set jsondiff.DiffSet) jsondiff.DiffSet {
	out := set[:0]
	for _, d := range set {
		if d != nil && d.Type == jsondiff.DiffTypeCreate && selfDeleting(d.DesiredObject) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// selfDeleting tells whether obj is a Job whose manifest sets
// ttlSecondsAfterFinished.
func selfDeleting(obj client.Object) bool {
	u, ok := obj.(*unstructured.Unstructured)
	return ok && jobttl.IsSelfDeleting(u)
}

// DetectRefused is Detect that also returns the objects whose dry-run the
// API server refused for an immutable field, each as a recreate works on
// it (recreate.Policy.Judge tells what an update would do with it).
func (c *Checker) DetectRefused(ctx context.Context, rel *releasev1.Release) (jsondiff.DiffSet, []recreate.Refused, error) {
	objects, errs, err := c.desiredObjects(rel)
	if err != nil {
		return nil, nil, err
	}
	if len(c.opts.OverrideManagers) > 0 {
		for _, obj := range objects {
			if err := c.takeOverFields(ctx, obj); err != nil {
				errs = append(errs, fmt.Errorf("%s: taking over fields of %s: %w",
					ssautil.FmtUnstructured(obj), strings.Join(c.opts.OverrideManagers, ", "), err))
			}
		}
	}
	opts := []jsondiff.ListOption{
		jsondiff.FieldOwner(c.opts.FieldManager),
		jsondiff.ExclusionSelector(exclusion),
		jsondiff.Rationalize(true),
		jsondiff.Graceful(true),
		// Patches end up in logs; Secret values must not.
		jsondiff.MaskSecrets(true),
	}
	if len(c.opts.Ignore.Detect) > 0 {
		opts = append(opts, jsondiff.IgnoreRules(c.opts.Ignore.Detect))
	}
	set, err := jsondiff.UnstructuredList(ctx, c.dryRun, objects, opts...)
	var refused []recreate.Refused
	if err != nil {
		// Some objects could not be compared. Those whose dry-run was
		// refused for an immutable field have drifted in it; every other
		// failure stands, as in upstream's diff. Only the refused ones
		// are compared again: that comparison cannot apply the ignore
		// rules, so an object whose ignore rule failed (a path into an
		// array by a key, say) would come back with the drift of fields
		// meant to be ignored.
		refusedObjects, failures := splitImmutable(err)
		var failed []error
		set, refused, failed = c.immutableDrift(ctx, refusedObjects, set, opts)
		errs = append(errs, failures...)
		errs = append(errs, failed...)
	}
	return set, refused, errors.Join(errs...)
}

// splitImmutable sorts the failures of a diff into the objects whose
// dry-run was refused for an immutable field and all other errors.
func splitImmutable(err error) (refused []*unstructured.Unstructured, others []error) {
	all := []error{err}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		all = utilerrors.Flatten(agg).Errors()
	}
	for _, e := range all {
		var dryRun *ssaerrors.DryRunErr
		if errors.As(e, &dryRun) && dryRun.InvolvedObject() != nil && recreate.IsImmutable(e) {
			refused = append(refused, dryRun.InvolvedObject())
			continue
		}
		others = append(others, e)
	}
	return refused, others
}

// desiredObjects reads the manifest of rel as Helm would apply it: with the
// release namespace on namespaced objects that name none, the ownership
// metadata Helm adds, and no annotation the API server refuses. Without that metadata the dry-run would report Helm's
// own label and annotations as drift, and a correction would drop them.
// Objects whose kind the cluster does not serve (any more) are left out and
// reported in skipped; err means the manifest itself is unreadable.
func (c *Checker) desiredObjects(rel *releasev1.Release) (objects []*unstructured.Unstructured, skipped []error, err error) {
	all, err := ssautil.ReadObjects(strings.NewReader(rel.Manifest))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the manifest of release %s/%s.v%d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	if err := ssanormalize.UnstructuredListWithScheme(all, c.client.Scheme()); err != nil {
		return nil, nil, fmt.Errorf("normalizing the manifest of release %s/%s.v%d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	for _, obj := range all {
		if obj.GetNamespace() == "" {
			namespaced, err := c.namespaced(obj)
			if err != nil {
				skipped = append(skipped, err)
				continue
			}
			if namespaced {
				obj.SetNamespace(rel.Namespace)
			}
		}
		setHelmOwnership(obj, rel.Name, rel.Namespace)
		// Helm's client never sends these to the cluster; the dry-run
		// would refuse them.
		helmclient.StripUnappliable(obj)
		objects = append(objects, obj)
	}
	return objects, skipped, nil
}

func (c *Checker) namespaced(obj *unstructured.Unstructured) (bool, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, fmt.Errorf("finding the scope of %s %q: %w", gvk.Kind, obj.GetName(), err)
	}
	return mapping.Scope.Name() == apimeta.RESTScopeNameNamespace, nil
}

// The metadata Helm puts on every object it deploys (see Helm's
// action.setMetadataVisitor).
const (
	managedByLabel             = "app.kubernetes.io/managed-by"
	managedByHelm              = "Helm"
	releaseNameAnnotation      = "meta.helm.sh/release-name"
	releaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

func setHelmOwnership(obj *unstructured.Unstructured, name, namespace string) {
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[managedByLabel] = managedByHelm
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[releaseNameAnnotation] = name
	annotations[releaseNamespaceAnnotation] = namespace
	obj.SetAnnotations(annotations)
}

// takeOverFields hands the fields the override managers own on the
// in-cluster copy of obj to the checker's field manager.
func (c *Checker) takeOverFields(ctx context.Context, obj *unstructured.Unstructured) error {
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if ssautil.AnyInMetadata(existing, exclusion) {
		return nil
	}
	var managers []ssa.FieldManager
	for _, name := range c.opts.OverrideManagers {
		managers = append(managers,
			ssa.FieldManager{Name: name, OperationType: metav1.ManagedFieldsOperationApply},
			ssa.FieldManager{Name: name, OperationType: metav1.ManagedFieldsOperationUpdate})
	}
	patches, err := ssa.PatchReplaceFieldsManagers(existing, managers, c.opts.FieldManager)
	if err != nil || len(patches) == 0 {
		return err
	}
	raw, err := json.Marshal(patches)
	if err != nil {
		return err
	}
	return c.client.Patch(ctx, existing, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(c.opts.FieldManager))
}

// Correct server-side applies the manifest version of every object set
// reports as deleted or changed. Ignored fields keep their in-cluster
// values and excluded objects are skipped, as in Detect. It goes on after
// a failed object and returns what it applied with the failures.
func (c *Checker) Correct(ctx context.Context, set jsondiff.DiffSet) (*ssa.ChangeSet, error) {
	manager := ssa.NewResourceManager(c.client, nil, ssa.Owner{Field: c.opts.FieldManager, Group: helmv2.GroupVersion.Group})
	opts := ssa.DefaultApplyOptions()
	opts.ExclusionSelector = exclusion
	opts.DriftIgnoreRules = c.opts.Ignore.Correct

	var objects []*unstructured.Unstructured
	for _, d := range Drifted(set) {
		obj, ok := d.DesiredObject.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("drift: unexpected object type %T", d.DesiredObject)
		}
		objects = append(objects, obj.DeepCopy())
	}
	// Namespaces and CRDs before the objects that need them.
	sort.Sort(ssa.SortableUnstructureds(objects))

	changes := ssa.NewChangeSet()
	var errs []error
	for _, obj := range objects {
		entry, err := manager.Apply(ctx, obj, opts)
		if recreate.IsImmutable(err) {
			entry, err = c.recreateRefused(ctx, manager, obj, opts, err)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes.Add(*entry)
	}
	return changes, errors.Join(errs...)
}

// Drifted returns the diffs of objects that were deleted or changed.
func Drifted(set jsondiff.DiffSet) []*jsondiff.Diff {
	var out []*jsondiff.Diff
	for _, d := range set {
		if d != nil && (d.Type == jsondiff.DiffTypeCreate || d.Type == jsondiff.DiffTypeUpdate) {
			out = append(out, d)
		}
	}
	return out
}
