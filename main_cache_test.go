package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TestCachedHelmReleasesCarryNoManagedFields: every status write diffs
// the whole HelmRelease, managedFields included, though nothing in the
// controller reads them; the cache keeps HelmReleases without them, and
// the watch selector still narrows it.
func TestCachedHelmReleasesCarryNoManagedFields(t *testing.T) {
	cfg := buildConfig(t, t.Context(), "--watch-label-selector=sharding.fluxcd.io/key=shard1")
	for obj, byObject := range cfg.manager.Cache.ByObject {
		if _, ok := obj.(*v2.HelmRelease); !ok {
			continue
		}
		if byObject.Label == nil || byObject.Label.String() != "sharding.fluxcd.io/key=shard1" {
			t.Errorf("HelmRelease cache selector %v, want the watch selector", byObject.Label)
		}
		if byObject.Transform == nil {
			t.Fatal("HelmReleases are cached as the API server sends them, managedFields and all")
		}
		hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "podinfo", Namespace: "apps",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm-controller", Operation: metav1.ManagedFieldsOperationUpdate}}}}
		out, err := byObject.Transform(hr)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.(*v2.HelmRelease); len(got.ManagedFields) != 0 || got.Name != "podinfo" {
			t.Errorf("cached HelmRelease %s with %d managedFields entries, want podinfo with none", got.Name, len(got.ManagedFields))
		}
		return
	}
	t.Fatal("no cache options for HelmReleases")
}
