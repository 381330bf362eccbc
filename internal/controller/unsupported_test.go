package controller

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

func TestUnsupportedFields(t *testing.T) {
	cases := []struct {
		name      string
		defaultSA string
		mutate    func(*v2.HelmRelease)
		want      []string
	}{
		{name: "plain release", mutate: func(*v2.HelmRelease) {}},
		{name: "drift detection only", mutate: func(o *v2.HelmRelease) {
			o.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
		}},
		{name: "remote cluster", mutate: func(o *v2.HelmRelease) {
			o.Spec.KubeConfig = &meta.KubeConfigReference{}
		}, want: []string{"spec.kubeConfig"}},
		{name: "service account", mutate: func(o *v2.HelmRelease) { o.Spec.ServiceAccountName = "deployer" }, want: []string{"spec.serviceAccountName"}},
		{name: "default service account", defaultSA: "default", mutate: func(*v2.HelmRelease) {}, want: []string{"--default-service-account"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := &v2.HelmRelease{}
			tc.mutate(obj)
			r := &HelmReleaseReconciler{DefaultServiceAccount: tc.defaultSA}
			err := r.unsupportedFields(obj)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %s", err, w)
				}
			}
		})
	}
}
