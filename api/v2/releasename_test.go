package v2_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

func TestShortenReleaseName(t *testing.T) {
	long := "a-very-long-target-namespace-name-plus-a-long-helmrelease-name"
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "short kept", in: "app", want: "app"},
		{name: "exactly 53 kept", in: strings.Repeat("x", 53), want: strings.Repeat("x", 53)},
		// Expected value computed with: echo -n NAME | sha256sum (first 12), after the first 40 characters.
		{name: "long shortened", in: long, want: "a-very-long-target-namespace-name-plus-a-fc40a747e2a3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := v2.ShortenReleaseName(tt.in)
			if got != tt.want {
				t.Errorf("ShortenReleaseName(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if len(got) > 53 {
				t.Errorf("result %q is %d characters long", got, len(got))
			}
		})
	}
}

func TestReleaseName(t *testing.T) {
	hr := func(mutate func(*v2.HelmRelease)) *v2.HelmRelease {
		obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}}
		if mutate != nil {
			mutate(obj)
		}
		return obj
	}
	tests := []struct {
		name string
		obj  *v2.HelmRelease
		want string
	}{
		{name: "object name", obj: hr(nil), want: "app"},
		{name: "target namespace prefix", obj: hr(func(o *v2.HelmRelease) { o.Spec.TargetNamespace = "apps" }), want: "apps-app"},
		{name: "explicit release name", obj: hr(func(o *v2.HelmRelease) {
			o.Spec.TargetNamespace = "apps"
			o.Spec.ReleaseName = "custom"
		}), want: "custom"},
		{name: "long composed name shortened", obj: hr(func(o *v2.HelmRelease) {
			o.Name = strings.Repeat("n", 40)
			o.Spec.TargetNamespace = strings.Repeat("t", 20)
		}), want: v2.ShortenReleaseName(strings.Repeat("t", 20) + "-" + strings.Repeat("n", 40))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v2.ReleaseName(tt.obj); got != tt.want {
				t.Errorf("ReleaseName = %q, want %q", got, tt.want)
			}
		})
	}
}
