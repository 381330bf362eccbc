// Package jobttl tells which objects of a release are Jobs that delete
// themselves once finished: those whose manifest sets
// spec.ttlSecondsAfterFinished (0 included), which Kubernetes' TTL
// controller deletes, often before a wait sees them finish. A Tracker
// watches each such Job from its apply on and keeps the last state it saw,
// so that every wait of the controller judges a gone Job by how it really
// ended (internal/helmclient's jobs.go for Helm's waits, internal/sequencing
// for readiness expressions), and a Job nothing saw finish never counts as
// done.
package jobttl

import (
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// Kind is the group and kind of a Kubernetes Job.
var Kind = schema.GroupKind{Group: batchv1.GroupName, Kind: "Job"}

// Manifest returns info's object as unstructured, with its kind, when it
// is a Job that deletes itself once finished.
func Manifest(info *resource.Info) (*unstructured.Unstructured, bool) {
	if info == nil || info.Object == nil {
		return nil, false
	}
	gvk := info.Object.GetObjectKind().GroupVersionKind()
	if info.Mapping != nil {
		gvk = info.Mapping.GroupVersionKind
	}
	if gvk.GroupKind() != Kind {
		return nil, false
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(info.Object)
	if err != nil || !hasTTL(content) {
		return nil, false
	}
	u := &unstructured.Unstructured{Object: content}
	// kstatus tells objects apart by their kind: keep it on the copy.
	u.SetGroupVersionKind(gvk)
	return u, true
}

// IsSelfDeleting reports whether obj, as a manifest or a live object
// carrying its kind, is a Job that deletes itself once finished.
func IsSelfDeleting(obj *unstructured.Unstructured) bool {
	return obj != nil && obj.GroupVersionKind().GroupKind() == Kind && hasTTL(obj.Object)
}

// hasTTL tells whether a Job's content sets spec.ttlSecondsAfterFinished
// (null leaves it unset, as the API server reads it).
func hasTTL(content map[string]any) bool {
	ttl, found, err := unstructured.NestedFieldNoCopy(content, "spec", "ttlSecondsAfterFinished")
	return err == nil && found && ttl != nil
}

// DeletesItself reports whether info is a Job that deletes itself once
// finished.
func DeletesItself(info *resource.Info) bool {
	_, ok := Manifest(info)
	return ok
}
