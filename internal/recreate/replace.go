package recreate

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Object is one object of the cluster as Replace works on it, through
// whatever client the caller applies with.
type Object interface {
	// UID reads the object in the cluster; a NotFound error when it is
	// gone.
	UID(ctx context.Context) (types.UID, error)
	// DryRunCreate asks the API server to create the desired object
	// without persisting it.
	DryRunCreate(ctx context.Context) error
	// Delete deletes the object if its UID is still uid.
	Delete(ctx context.Context, uid types.UID, propagation metav1.DeletionPropagation) error
}

// Recreated reports one object Replace deleted so that its new version
// can be created.
type Recreated struct {
	// Object is Kind/namespace/name.
	Object string
	// Fields is what the API server refused to change in place.
	Fields string
	// Propagation is how its dependents were treated.
	Propagation metav1.DeletionPropagation
}

// Propagation is how a recreate deletes an object of kind gk. A
// StatefulSet's pods are orphaned: the new StatefulSet adopts them (their
// PersistentVolumeClaims were never its dependents to delete), so no pod
// restarts for a volumeClaimTemplates change. Everything else takes its
// dependents with it, as the new object makes its own (a Job's pods, a
// Deployment's ReplicaSets, whose selector may be what changed).
func Propagation(gk schema.GroupKind) metav1.DeletionPropagation {
	if gk == (schema.GroupKind{Group: "apps", Kind: "StatefulSet"}) {
		return metav1.DeletePropagationOrphan
	}
	return metav1.DeletePropagationBackground
}

// pollInterval is how often Replace looks whether the object is gone.
const pollInterval = 250 * time.Millisecond

// Replace deletes obj, of kind gk, and waits until it is gone, so its new
// version can be created. It first dry-runs creating the new version: only
// an answer that the object already exists shows the API server would
// accept it as a new object, so a manifest that is simply invalid is
// refused without deleting anything. Nothing to delete is not an error.
// The wait ends at ctx's deadline.
func Replace(ctx context.Context, obj Object, gk schema.GroupKind) error {
	uid, err := obj.UID(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading it: %w", err)
	}
	if err := obj.DryRunCreate(ctx); !apierrors.IsAlreadyExists(err) {
		if err == nil {
			err = errors.New("the API server did not see the existing object")
		}
		return fmt.Errorf("its new version would not be accepted either: %w", err)
	}
	if err := obj.Delete(ctx, uid, Propagation(gk)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting it: %w", err)
	}
	return waitGone(ctx, obj, uid)
}

// waitGone waits until the object with uid no longer exists: deleted, or
// already replaced by one with another UID.
func waitGone(ctx context.Context, obj Object, uid types.UID) error {
	err := wait.PollUntilContextCancel(ctx, pollInterval, true, func(ctx context.Context) (bool, error) {
		current, err := obj.UID(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, nil // transient: look again
		}
		return current != uid, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for it to be deleted: %w", err)
	}
	return nil
}

// Refused is an object whose update the API server refused for an
// immutable field.
type Refused struct {
	// Object is Kind/namespace/name; Kind and the manifest's Annotations
	// decide whether it may be recreated.
	Object      string
	Kind        schema.GroupKind
	Annotations map[string]string
	// Cause is the refusal.
	Cause error
	// Cluster reaches the object.
	Cluster Object
}

// Recreate recreates r when p allows it: Replace, then create, which
// applies r's manifest again the way the refused update would have. It
// returns what was recreated, or an *ImmutableError naming the object and
// the refused fields with why nothing was recreated, or where recreating
// it failed. Both Helm's updates (Client) and drift correction use it.
func (p Policy) Recreate(ctx context.Context, r Refused, create func(context.Context) error) (Recreated, error) {
	ierr := &ImmutableError{Object: r.Object, Fields: Fields(r.Cause), Err: r.Cause}
	ok, advice := p.Allows(r.Kind, r.Annotations)
	if !ok {
		ierr.Advice = advice
		return Recreated{}, ierr
	}
	if err := Replace(ctx, r.Cluster, r.Kind); err != nil {
		ierr.Advice = "recreating it failed: " + err.Error()
		return Recreated{}, ierr
	}
	if err := create(ctx); err != nil {
		ierr.Advice = "it was deleted to be recreated, but creating it failed: " + err.Error()
		return Recreated{}, ierr
	}
	return Recreated{Object: r.Object, Fields: ierr.Fields, Propagation: Propagation(r.Kind)}, nil
}
