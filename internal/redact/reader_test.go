package redact

import (
	"context"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
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
	creds := []meta.ValuesReference{{Kind: "Secret", Name: "creds", ValuesKey: "password"}, {Kind: "ConfigMap", Name: "settings", ValuesKey: "mode"}}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "settings"}, &corev1.ConfigMap{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "missing"}, &corev1.Secret{}); err == nil {
		t.Fatal("reading a missing Secret: no error")
	}
	if got := r.Used(creds).String("s3cr3t-value plain-value"); got != "s3cr3t-value plain-value" {
		t.Errorf("before the Secret was read: %q, want nothing redacted", got)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "creds"}, &corev1.Secret{}); err != nil {
		t.Fatal(err)
	}
	if got := r.Used(creds).String("s3cr3t-value plain-value"); got != Placeholder+" plain-value" {
		t.Errorf("after: %q, want the Secret's value redacted and the ConfigMap's kept", got)
	}
}

// Only the keys valuesFrom reads are redacted, and never a word the
// HelmRelease itself shows: a values Secret that names the release's
// namespace or chart must not blank them out of every message.
func TestUsedRedactsOnlyReadKeysAndNoPublicWord(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-values"}, Data: map[string][]byte{
			"values.yaml": []byte("fullnameOverride: podinfo\nnamespace: monitoring\npassword: hunter22-secret\n"),
			"unused":      []byte("never-read-value"),
		}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "token"}, Data: map[string][]byte{
			"token": []byte("t0ken-value"),
			"other": []byte("other-value"),
		}},
	).Build()
	r := &Reader{Client: c}
	for _, name := range []string{"app-values", "token"} {
		if err := r.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &corev1.Secret{}); err != nil {
			t.Fatal(err)
		}
	}
	refs := []meta.ValuesReference{
		{Kind: "Secret", Name: "app-values"},
		{Kind: "Secret", Name: "token", ValuesKey: "token", TargetPath: "auth.token"},
		{Kind: "ConfigMap", Name: "token", ValuesKey: "other"},
	}
	s := r.Used(refs, "monitoring", "podinfo")
	tests := []struct{ msg, want string }{
		{"Helm install succeeded for release monitoring/podinfo.v1 with chart podinfo@6.7.1", "Helm install succeeded for release monitoring/podinfo.v1 with chart podinfo@6.7.1"},
		{`Unsupported value: "hunter22-secret"`, `Unsupported value: "[redacted]"`},
		{"token t0ken-value refused", "token [redacted] refused"},
		{"never-read-value other-value", "never-read-value other-value"},
	}
	for _, tc := range tests {
		if got := s.String(tc.msg); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestForReleaseOfEveryChartSource: the public names are read from any
// HelmRelease, whatever its chart source: a chart template of kind
// OCIRepository has no sourceRef (found as a panic in e2e), a chartRef
// none of a template.
func TestForReleaseOfEveryChartSource(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "vals"},
		Data: map[string][]byte{"values.yaml": []byte("password: hunter22-secret\nnamespace: apps\n")}}).Build()
	for name, mutate := range map[string]func(*v2.HelmRelease){
		"chart template with a sourceRef": func(o *v2.HelmRelease) {
			o.Spec.Chart = &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{Chart: "podinfo",
				SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: "HelmRepository", Name: "charts"}}}
		},
		"chart template of kind OCIRepository": func(o *v2.HelmRelease) {
			o.Spec.Chart = &helmv2.HelmChartTemplate{Kind: "OCIRepository"}
		},
		"chartRef": func(o *v2.HelmRelease) {
			o.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: "OCIRepository", Name: "podinfo"}
		},
		"nothing": func(*v2.HelmRelease) {},
	} {
		t.Run(name, func(t *testing.T) {
			obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "web"}}
			obj.Spec.ValuesFrom = []meta.ValuesReference{{Kind: "Secret", Name: "vals"}}
			mutate(obj)
			r := &Reader{Client: c}
			if err := r.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: "vals"}, &corev1.Secret{}); err != nil {
				t.Fatal(err)
			}
			if got := r.ForRelease(obj).String("release apps/web: hunter22-secret"); got != "release apps/web: "+Placeholder {
				t.Errorf("got %q", got)
			}
		})
	}
}
