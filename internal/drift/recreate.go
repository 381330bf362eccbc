package drift

import (
	"context"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	ssautil "github.com/fluxcd/pkg/ssa/utils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/recreate"
)

// recreateRefused recreates desired, whose correction refused (cause) for
// an immutable field, when Options.Recreate allows it, and applies it
// again. Without permission the error names the object, the fields and
// what would allow a recreate.
func (c *Checker) recreateRefused(ctx context.Context, manager *ssa.ResourceManager, desired *unstructured.Unstructured, opts ssa.ApplyOptions, cause error) (*ssa.ChangeSetEntry, error) {
	if c.opts.RecreateTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RecreateTimeout)
		defer cancel()
	}
	refused := c.refused(desired, cause)
	var entry *ssa.ChangeSetEntry
	done, err := c.opts.Recreate.Recreate(ctx, refused, func(ctx context.Context) error {
		var err error
		entry, err = manager.Apply(ctx, desired, opts)
		return err
	})
	if err != nil {
		return nil, err
	}
	if c.opts.OnRecreate != nil {
		c.opts.OnRecreate(done)
	}
	return entry, nil
}

// refused is desired, refused by cause, as a recreate works on it through
// the checker's client.
func (c *Checker) refused(desired *unstructured.Unstructured, cause error) recreate.Refused {
	return recreate.Refused{Object: ssautil.FmtUnstructured(desired), Kind: desired.GroupVersionKind().GroupKind(),
		Desired: desired, Cause: cause, Cluster: &clientObject{client: c.client, desired: desired}, Dependents: c.opts.Dependents}
}

// immutableDrift adds to set an update diff for each of objects that set
// lacks because its dry-run was refused for an immutable field: the
// object in the cluster differs from the manifest in a field only a
// recreate can change (a Job replaced by hand with another pod template).
// It returns those refused, with the refusal, and the errors of the
// objects it could not compare otherwise.
func (c *Checker) immutableDrift(ctx context.Context, objects []*unstructured.Unstructured, set jsondiff.DiffSet, opts []jsondiff.ListOption) (jsondiff.DiffSet, []recreate.Refused, []error) {
	compared := map[string]bool{}
	for _, d := range set {
		compared[ssautil.FmtUnstructured(d.DesiredObject.(*unstructured.Unstructured))] = true
	}
	var resOpts []jsondiff.ResourceOption
	for _, o := range opts {
		if r, ok := o.(jsondiff.ResourceOption); ok {
			resOpts = append(resOpts, r)
		}
	}
	var errs []error
	var refused []recreate.Refused
	for _, obj := range objects {
		if compared[ssautil.FmtUnstructured(obj)] {
			continue
		}
		d, err := jsondiff.Unstructured(ctx, c.dryRun, obj, resOpts...)
		if err == nil {
			set = append(set, d) // compared at the second try
			continue
		}
		if !recreate.IsImmutable(err) {
			errs = append(errs, err)
			continue
		}
		current := &unstructured.Unstructured{}
		current.SetGroupVersionKind(obj.GroupVersionKind())
		if getErr := c.client.Get(ctx, client.ObjectKeyFromObject(obj), current); getErr != nil {
			errs = append(errs, err)
			continue
		}
		set = append(set, &jsondiff.Diff{Type: jsondiff.DiffTypeUpdate, DesiredObject: obj, ClusterObject: current})
		refused = append(refused, c.refused(obj, err))
	}
	return set, refused, errs
}

// clientObject is a release object reached through the checker's client.
type clientObject struct {
	client  client.Client
	desired *unstructured.Unstructured
}

func (o *clientObject) Live(ctx context.Context) (*unstructured.Unstructured, error) {
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(o.desired.GroupVersionKind())
	if err := o.client.Get(ctx, client.ObjectKeyFromObject(o.desired), current); err != nil {
		return nil, err
	}
	return current, nil
}

func (o *clientObject) DryRunCreate(ctx context.Context) error {
	return o.client.Create(ctx, o.desired.DeepCopy(), client.DryRunAll)
}

func (o *clientObject) Delete(ctx context.Context, uid types.UID, propagation metav1.DeletionPropagation) error {
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(o.desired.GroupVersionKind())
	current.SetNamespace(o.desired.GetNamespace())
	current.SetName(o.desired.GetName())
	return o.client.Delete(ctx, current, client.PropagationPolicy(propagation), client.Preconditions{UID: &uid})
}
