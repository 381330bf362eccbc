package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// ResourceRecreatedReason: an object the API server refused to update in
// place (an immutable field changed) was deleted and created again; see
// internal/recreate.
const ResourceRecreatedReason = "ResourceRecreated"

// recreatedEvents returns the observer that tells, in an event on obj,
// each object an upgrade, rollback or drift correction recreated and why.
func recreatedEvents(obj *v2.HelmRelease, recorder reconcile.EventRecorder) func(recreate.Recreated) {
	return func(r recreate.Recreated) {
		if recorder == nil {
			return
		}
		msg := fmt.Sprintf("%s recreated: the cluster refused to update it in place (%s)", r.Object, r.Fields)
		if r.Propagation == metav1.DeletePropagationOrphan {
			msg += "; its pods were kept for the new object to adopt"
		}
		recorder.AnnotatedEventf(obj, nil, corev1.EventTypeNormal, ResourceRecreatedReason, "%s", msg)
	}
}
