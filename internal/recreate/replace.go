package recreate

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// Object is one object of the cluster as a recreate works on it, through
// whatever client the caller applies with. Every call ends when ctx ends.
type Object interface {
	// Live reads the object in the cluster; a NotFound error when it is
	// gone.
	Live(ctx context.Context) (*unstructured.Unstructured, error)
	// DryRunCreate asks the API server to create the desired object
	// without persisting it.
	DryRunCreate(ctx context.Context) error
	// Delete deletes the object if its UID is still uid.
	Delete(ctx context.Context, uid types.UID, propagation metav1.DeletionPropagation) error
}

// Refused is an object whose update the API server refused for an
// immutable field.
type Refused struct {
	// Object is Kind/namespace/name.
	Object string
	Kind   schema.GroupKind
	// Desired is the manifest the update applied: its annotations give
	// or refuse consent, its selector is compared with the cluster's.
	Desired *unstructured.Unstructured
	// Cause is the refusal.
	Cause error
	// Cluster reaches the object, Dependents what it owns.
	Cluster    Object
	Dependents Dependents
	// InPlace, when set, updates the object in place with a patch: the
	// refusal answered a replace (a PUT, Helm's force with client-side
	// apply), which the API server refuses for an object whose manifest
	// lacks what it generated at creation (a Job's selector and
	// controller-uid labels) even when nothing changed.
	InPlace func(context.Context) error
}

func (r Refused) annotation() string {
	if r.Desired == nil {
		return ""
	}
	return r.Desired.GetAnnotations()[Annotation]
}

// Recreated reports one object deleted and created again.
type Recreated struct {
	// Object is Kind/namespace/name.
	Object string
	// Fields is what the API server refused to change in place.
	Fields string
	// Propagation is how its dependents were treated.
	Propagation metav1.DeletionPropagation
	// InPlace says the object was not recreated after all: a patch
	// updated it in place (Refused.InPlace), and nothing was deleted.
	InPlace bool
}

// Propagation is how a recreate deletes an object of kind gk. A
// StatefulSet's pods are orphaned: the new StatefulSet (same selector, the
// guard sees to that) adopts them, so no pod restarts for a
// volumeClaimTemplates change. Everything else takes its dependents with
// it, as the new object makes its own (a Job's pods, a Deployment's
// ReplicaSets, whose selector may be what changed); dependents that hold
// data stop a recreate before it deletes anything.
func Propagation(gk schema.GroupKind) metav1.DeletionPropagation {
	if gk == statefulSetKind {
		return metav1.DeletePropagationOrphan
	}
	return metav1.DeletePropagationBackground
}

// pollInterval is how often a recreate looks whether the object is gone.
const pollInterval = 250 * time.Millisecond

// Recreate recreates r when p allows it (decide), and otherwise deletes
// nothing: then it deletes the object on condition of the UID read,
// waits until it is gone and creates it, which applies r's manifest again
// the way the refused update would have.
//
// It returns what was recreated, or an *ImmutableError naming the object
// and the refused fields with what stopped it, what would let it go
// ahead, or where recreating it failed. Every wait ends with ctx: its
// deadline is the action's, and a shutdown cancels it. Both Helm's
// updates (Client) and drift correction use it; a plan asks Judge, which
// decides the same way.
func (p Policy) Recreate(ctx context.Context, r Refused, create func(context.Context) error) (Recreated, error) {
	ierr := &ImmutableError{Object: r.Object, Fields: Fields(r.Cause), Err: r.Cause}
	d, err := p.decide(ctx, &r, ierr)
	switch {
	case err != nil:
		return Recreated{}, err
	case d.patched:
		return Recreated{Object: r.Object, InPlace: true}, nil
	case d.live == nil:
		// Gone since the refusal: creating it deletes nothing.
		return p.created(ctx, r, ierr, create, false)
	}
	fail := func(advice string) (Recreated, error) {
		ierr.Advice = advice
		return Recreated{}, ierr
	}
	if err := ctx.Err(); err != nil {
		return fail("not recreated: " + context.Cause(ctx).Error())
	}
	err = r.Cluster.Delete(ctx, d.live.GetUID(), Propagation(r.Kind))
	switch {
	case apierrors.IsNotFound(err):
		return p.created(ctx, r, ierr, create, false)
	case apierrors.IsConflict(err):
		return fail("not recreated: it was replaced while the controller looked at it; the next attempt sees the new one")
	case err != nil:
		return fail("not recreated: deleting it failed: " + err.Error())
	}
	if err := waitGone(ctx, r.Cluster, d.live.GetUID()); err != nil {
		return fail("it was deleted to be recreated, but it was not gone in time to create it again (the next attempt creates it): " + err.Error())
	}
	return p.created(ctx, r, ierr, create, true)
}

// decision is what the checks before any deletion decided: the object
// was updated in place after all (patched), is gone (live nil), or may be
// deleted and created again with the consent of by.
type decision struct {
	patched bool
	live    *unstructured.Unstructured
	by      Consent
}

// decide runs, in order, every check a recreate passes before it deletes
// anything: kinds never recreated; the manifest's opt-out; when r
// answered a replace and consent is given, the patch in place
// (Refused.InPlace, the only write here); the object in the cluster
// against the memory and the guards (which no consent lifts); a dry run
// showing the API server would accept the new version as a new object
// (so a manifest that is simply invalid deletes nothing); consent. A
// refusal is ierr with its advice.
func (p Policy) decide(ctx context.Context, r *Refused, ierr *ImmutableError) (decision, error) {
	fail := func(advice string) (decision, error) {
		ierr.Advice = advice
		return decision{}, ierr
	}
	if why := neverRecreated(r.Kind); why != "" {
		return fail(why)
	}
	by, optedOut, advice := p.consent(*r)
	if optedOut {
		return fail(advice)
	}
	if by != "" && r.InPlace != nil {
		patched, err := p.patchedInPlace(ctx, r, ierr)
		switch {
		case err != nil:
			return decision{}, err
		case patched:
			return decision{patched: true}, nil
		}
		if by, optedOut, advice = p.consent(*r); optedOut {
			return fail(advice)
		}
	}
	live, err := r.Cluster.Live(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return decision{by: by}, nil
	case err != nil:
		return fail("not recreated: reading it failed: " + err.Error())
	}
	if why := p.cleared(ctx, *r, live); why != "" {
		return fail(why)
	}
	if by == "" {
		return fail(advice)
	}
	return decision{live: live, by: by}, nil
}

// cleared checks live, the object r refers to, against the memory, the
// guards and the dry run of its creation, and says why it must not be
// recreated, or "".
func (p Policy) cleared(ctx context.Context, r Refused, live *unstructured.Unstructured) string {
	if at := p.Memory.recreated(live.GetUID(), r.Desired); !at.IsZero() {
		return fmt.Sprintf("not recreated again: it was recreated at %s from the same manifest and is refused again, "+
			"so something changes it after it is created (a mutating webhook or another controller)", at.UTC().Format(time.RFC3339))
	}
	why, err := p.guard(ctx, r, live)
	switch {
	case err != nil:
		return "not recreated: " + err.Error()
	case why != "":
		return "not recreated: " + why
	}
	if err := r.Cluster.DryRunCreate(ctx); !apierrors.IsAlreadyExists(err) {
		if err == nil {
			err = errors.New("the API server did not see the existing object")
		}
		return "not recreated: its new version would not be accepted as a new object either: " + err.Error()
	}
	return ""
}

// patchedInPlace tries r's update again as a patch, before anything is
// deleted: only a field that cannot be updated (the patch is refused too)
// makes a recreate; what the API server generated is then no change. It
// returns true when the patch updated the object (or found nothing to
// change). When the patch is refused for an immutable field, r and ierr
// take that refusal as the cause, for consent and the guards to judge; any
// other failure ends the update with ierr.
func (p Policy) patchedInPlace(ctx context.Context, r *Refused, ierr *ImmutableError) (bool, error) {
	err := r.InPlace(ctx)
	switch {
	case err == nil:
		return true, nil
	case !IsImmutable(err):
		ierr.Advice = "not recreated: updating it in place after its replace was refused failed: " + err.Error()
		return false, ierr
	}
	r.Cause, ierr.Err, ierr.Fields = err, err, Fields(err)
	return false, nil
}

// created creates r's object after it was deleted (deleted) or found
// gone, and remembers the new object.
func (p Policy) created(ctx context.Context, r Refused, ierr *ImmutableError, create func(context.Context) error, deleted bool) (Recreated, error) {
	if err := create(ctx); err != nil {
		if deleted {
			ierr.Advice = "it was deleted to be recreated, but creating it failed: " + err.Error()
		} else {
			ierr.Advice = "it was gone before it could be recreated, and creating it failed: " + err.Error()
		}
		return Recreated{}, ierr
	}
	if p.Memory != nil {
		if live, err := r.Cluster.Live(ctx); err == nil {
			p.Memory.remember(live.GetUID(), r.Desired)
		}
	}
	return Recreated{Object: r.Object, Fields: ierr.Fields, Propagation: Propagation(r.Kind)}, nil
}

// waitGone waits until the object with uid no longer exists: deleted, or
// already replaced by one with another UID.
func waitGone(ctx context.Context, obj Object, uid types.UID) error {
	live := func(ctx context.Context) (metav1.Object, error) { return obj.Live(ctx) }
	if err := kubewait.UntilGone(ctx, pollInterval, uid, live); err != nil {
		return fmt.Errorf("waiting for it to be deleted: %w", err)
	}
	return nil
}
