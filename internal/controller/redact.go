package controller

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/redact"
)

// redactConditions takes the HelmRelease's Secret values out of its
// condition messages before they are written.
func redactConditions(obj *v2.HelmRelease, registry *redact.Registry) {
	secrets := registry.Get(client.ObjectKeyFromObject(obj))
	if secrets == nil {
		return
	}
	for i := range obj.Status.Conditions {
		obj.Status.Conditions[i].Message = secrets.String(obj.Status.Conditions[i].Message)
	}
}
