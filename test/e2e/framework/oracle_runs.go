package framework

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The oracle's second promise: no running Job or Pod of a release is
// deleted unless something documented asked for it. Helm itself deletes a
// hook before it creates the hook again when the chart's
// helm.sh/hook-delete-policy says before-hook-creation (Helm's default
// when the chart names no policy); that is the chart's request, made the
// same way under upstream. Helm also deletes an ordinary object, a running
// Job included, that the revision it applies no longer has; upstream does
// the same. Everything else that deletes a hook Job, a bare hook Pod, or a
// Job that the same action then creates again under its name (a recreate)
// while it still runs is a kill: hook cleanup and the recreation of
// immutable objects must wait for such objects or leave them.

const hookDeletePolicyAnnotation = "helm.sh/hook-delete-policy"

// KilledRun is a Job or Pod deleted while it still ran.
type KilledRun struct {
	// Object is Kind/namespace/name.
	Object string
	// Order is the resourceVersion of the first state that shows the
	// deletion.
	Order uint64
	// State says how it was running.
	State string
}

func (k KilledRun) String() string {
	return fmt.Sprintf("oracle: %s was deleted at resourceVersion %d while it still ran (%s), and nothing "+
		"documented asked for that", k.Object, k.Order, k.State)
}

// KilledRuns returns the runs of rec that were deleted while running,
// except those whose names allowed lists (Kind/name, for tests that kill
// on purpose).
func KilledRuns(rec *Recording, allowed []string) []KilledRun {
	var kills []KilledRun
	for _, h := range rec.Objects {
		if !watchedRun(rec, h) {
			continue
		}
		at, ok := deletionStart(h)
		if !ok {
			continue
		}
		obj := at.Object
		if slices.Contains(allowed, h.Kind+"/"+obj.GetName()) {
			continue
		}
		complete, failed, _ := runOutcome(obj)
		if complete || failed {
			continue
		}
		if replacedByHelm(obj) && createdAgain(rec, h, math.MaxUint64) {
			continue
		}
		kills = append(kills, KilledRun{Object: h.describe(), Order: at.Order, State: runningState(obj)})
	}
	return kills
}

// watchedRun says whether h is held to not being killed: a hook Job, a
// hook Pod that no controller owns, or a Job recreated under its name.
func watchedRun(rec *Recording, h *ObjectHistory) bool {
	if len(h.States) == 0 || (h.Kind != "Job" && h.Kind != "Pod") {
		return false
	}
	first := h.States[0].Object
	hook := hookEvents(first) != nil
	switch {
	case h.Kind == "Pod":
		return hook && len(first.GetOwnerReferences()) == 0
	case hook:
		return true
	default:
		return recreated(rec, h)
	}
}

// recreated says whether the action that deleted h created it again under
// its name. A recreate deletes an object of the manifest it applies and
// creates it again at once, in that action. An object Helm deleted
// because the revision it applied dropped it may come back under the same
// name only by a later action (a rollback by hand, a later upgrade): that
// is a new object of another revision, and the deletion was Helm's
// documented removal, not a recreate. Helm stores a revision's record
// before the install, upgrade or rollback applies anything, so a record of
// h's release stored after the deletion began and before the next object
// of the name was created puts the two in different actions. A recreate by
// drift correction stores no record and stays one action. When the
// recording holds no record of the release (its storage is in another
// namespace) the actions cannot be told apart, and every creation again
// counts, as a recreate would.
func recreated(rec *Recording, h *ObjectHistory) bool {
	deleted, ok := deletionStart(h)
	if !ok {
		return false
	}
	again, ok := nextCreation(rec, h)
	if !ok {
		return false
	}
	stored, known := storedRecords(rec, deleted.Object.GetAnnotations()[releaseNameAnnotation])
	if !known {
		return true
	}
	for _, order := range stored {
		if order > deleted.Order && order < again {
			return false
		}
	}
	return true
}

// storedRecords returns when each of the records Helm stored for release
// was created (0 for one that existed before the recording started), and
// whether the recording holds any record of it.
func storedRecords(rec *Recording, release string) ([]uint64, bool) {
	if release == "" {
		return nil, false
	}
	var orders []uint64
	for _, s := range rec.Storage {
		if len(s.States) == 0 {
			continue
		}
		labels := s.States[0].Object.GetLabels()
		if labels["owner"] == "helm" && labels["name"] == release {
			orders = append(orders, s.Created())
		}
	}
	return orders, len(orders) > 0
}

// deletionStart is the first state of h that shows it being deleted: a
// deletionTimestamp, or the deletion itself.
func deletionStart(h *ObjectHistory) (Observation, bool) {
	for _, s := range h.States {
		if s.Deleted || s.Object.GetDeletionTimestamp() != nil {
			return s, true
		}
	}
	return Observation{}, false
}

// replacedByHelm says whether the chart asks Helm to delete the hook
// before it creates it again.
func replacedByHelm(obj *unstructured.Unstructured) bool {
	if hookEvents(obj) == nil {
		return false
	}
	policy, ok := obj.GetAnnotations()[hookDeletePolicyAnnotation]
	if !ok || strings.TrimSpace(policy) == "" {
		return true // Helm's default policy
	}
	for _, p := range strings.Split(policy, ",") {
		if strings.TrimSpace(p) == "before-hook-creation" {
			return true
		}
	}
	return false
}

// createdAgain says whether an object of h's kind, namespace and name was
// created after h, no later than until.
func createdAgain(rec *Recording, h *ObjectHistory, until uint64) bool {
	next, ok := nextCreation(rec, h)
	return ok && next <= until
}

// nextCreation returns when the first object of h's kind, namespace and
// name created after h was created, and whether there was one.
func nextCreation(rec *Recording, h *ObjectHistory) (uint64, bool) {
	if len(h.States) == 0 {
		return 0, false
	}
	first := h.States[0].Object
	next, found := uint64(0), false
	for _, other := range rec.Objects {
		if other == h || other.Kind != h.Kind || len(other.States) == 0 {
			continue
		}
		o := other.States[0].Object
		created := other.Created()
		if o.GetName() == first.GetName() && o.GetNamespace() == first.GetNamespace() && created > h.Created() &&
			(!found || created < next) {
			next, found = created, true
		}
	}
	return next, found
}

// runningState says what a running Job or Pod was doing.
func runningState(obj *unstructured.Unstructured) string {
	if obj.GetKind() == "Pod" {
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		return "phase " + phase
	}
	active, _, _ := unstructured.NestedInt64(obj.Object, "status", "active")
	return fmt.Sprintf("%d active pods, no Complete or Failed condition", active)
}
