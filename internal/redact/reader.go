package redact

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reader is a client that keeps the data of every Secret read through it:
// the values a HelmRelease takes from Secrets, which the controller and
// `helm-controller plan` redact from what they say.
type Reader struct {
	client.Client
	data []map[string][]byte
}

// Get reads obj and, when it is a Secret, keeps its data.
func (r *Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if secret, ok := obj.(*corev1.Secret); ok {
		r.data = append(r.data, secret.Data)
	}
	return nil
}

// Secrets are the values of every Secret read so far.
func (r *Reader) Secrets() *Secrets { return FromData(r.data...) }
