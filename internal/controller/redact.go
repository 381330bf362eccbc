package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/redact"
)

// secretsRead is a client that keeps the data of every Secret read
// through it: the values a HelmRelease takes from Secrets.
type secretsRead struct {
	client.Client
	data []map[string][]byte
}

func (s *secretsRead) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := s.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if secret, ok := obj.(*corev1.Secret); ok {
		s.data = append(s.data, secret.Data)
	}
	return nil
}

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
