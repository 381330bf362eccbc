package controller

import (
	"fmt"
	"strings"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// unsupportedFields lists spec fields whose behaviour this controller does
// not have yet and that would change where or what a release deploys.
// Ignoring them would install the wrong objects or into the wrong cluster,
// or with more rights than the user granted; such a HelmRelease is stopped
// with a message instead. Fields that only add checks (driftDetection,
// healthCheckExprs) are not listed: without them the release is still
// what the user asked for.
func (r *HelmReleaseReconciler) unsupportedFields(obj *v2.HelmRelease) error {
	var fields []string
	if obj.Spec.KubeConfig != nil {
		fields = append(fields, "spec.kubeConfig (remote clusters)")
	}
	if obj.Spec.ServiceAccountName != "" {
		fields = append(fields, "spec.serviceAccountName (impersonation)")
	} else if r.DefaultServiceAccount != "" {
		fields = append(fields, "--default-service-account (impersonation)")
	}
	if len(fields) == 0 {
		return nil
	}
	return fmt.Errorf("not supported by this helm-controller yet: %s; the release is left untouched", strings.Join(fields, ", "))
}
