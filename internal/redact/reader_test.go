package redact

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Only what a Secret read through the Reader holds is redacted; a
// ConfigMap's data and a failed read add nothing.
func TestReaderKeepsSecretData(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"password": []byte("s3cr3t-value")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "settings"}, Data: map[string]string{"mode": "plain-value"}},
	).Build()
	r := &Reader{Client: c}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "settings"}, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "missing"}, &corev1.Secret{}); err == nil {
		t.Fatal("reading a missing Secret: no error")
	}
	if got := r.Secrets().String("s3cr3t-value plain-value"); got != "s3cr3t-value plain-value" {
		t.Errorf("before the Secret was read: %q, want nothing redacted", got)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "creds"}, &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	if got := r.Secrets().String("s3cr3t-value plain-value"); got != Placeholder+" plain-value" {
		t.Errorf("after: %q, want the Secret's value redacted and the ConfigMap's kept", got)
	}
}
