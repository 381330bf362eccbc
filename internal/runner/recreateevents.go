package runner

import (
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/recreate"
)

// ResourceRecreatedReason: an object the API server refused to update in
// place (an immutable field changed) was deleted and created again; see
// internal/recreate.
const ResourceRecreatedReason = "ResourceRecreated"

// recreated tells, in an event, an object an upgrade, rollback or drift
// correction recreated and why.
func (r *Runner) recreated(action helmv2.Action, rc recreate.Recreated) {
	msg := fmt.Sprintf("%s recreated: the cluster refused to update it in place (%s)", rc.Object, rc.Fields)
	if rc.Propagation == metav1.DeletePropagationOrphan {
		msg += "; its pods were kept for the new object to adopt"
	}
	r.event(action, corev1.EventTypeNormal, ResourceRecreatedReason, msg)
}
