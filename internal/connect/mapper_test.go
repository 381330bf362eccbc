package connect

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/restmapper"
	kubetesting "k8s.io/client-go/testing"
)

var gadgetKind = schema.GroupKind{Group: "e2e.example.io", Kind: "Gadget"}

// staleDiscovery returns a discovery client whose cache was filled before
// the Gadget CRD was served, and a function that starts serving it.
func staleDiscovery(t *testing.T) (discovery.CachedDiscoveryInterface, func()) {
	t.Helper()
	fake := &fakediscovery.FakeDiscovery{Fake: &kubetesting.Fake{}}
	fake.Resources = []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true}},
	}}
	cached := memory.NewMemCacheClient(fake)
	if _, err := cached.ServerGroups(); err != nil {
		t.Fatal(err)
	}
	serveGadget := func() {
		fake.Resources = append(fake.Resources, &metav1.APIResourceList{
			GroupVersion: "e2e.example.io/v1",
			APIResources: []metav1.APIResource{{Name: "gadgets", Kind: "Gadget", Namespaced: true}},
		})
	}
	return cached, serveGadget
}

func TestMapperRediscoversAStaleCache(t *testing.T) {
	t.Run("the deferred mapper alone trusts the stale cache", func(t *testing.T) {
		cached, serveGadget := staleDiscovery(t)
		m := restmapper.NewDeferredDiscoveryRESTMapper(cached)
		if _, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}); err != nil {
			t.Fatal(err)
		}
		serveGadget()
		if _, err := m.RESTMapping(gadgetKind); !meta.IsNoMatchError(err) {
			t.Fatalf("RESTMapping = %v, want a no-match error (the situation NewMapper handles)", err)
		}
	})

	tests := []struct {
		name string
		// sinceLastReset is how long ago the previous rediscovery was.
		sinceLastReset time.Duration
		wantSleep      time.Duration
	}{
		{name: "first miss rediscovers at once", sinceLastReset: time.Hour},
		{name: "a miss right after a refresh waits out the interval", sinceLastReset: 300 * time.Millisecond, wantSleep: 700 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cached, serveGadget := staleDiscovery(t)
			m := NewMapper(cached).(*rediscoveringMapper)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var slept time.Duration
			m.now = func() time.Time { return now }
			m.sleep = func(d time.Duration) { slept += d; now = now.Add(d) }
			if _, err := m.RESTMapping(schema.GroupKind{Kind: "ConfigMap"}); err != nil {
				t.Fatal(err)
			}
			m.lastReset = now.Add(-tt.sinceLastReset)
			serveGadget()
			mapping, err := m.RESTMapping(gadgetKind, "v1")
			if err != nil {
				t.Fatalf("RESTMapping after the CRD is served: %v", err)
			}
			if mapping.Resource.Resource != "gadgets" {
				t.Errorf("resource %q, want gadgets", mapping.Resource.Resource)
			}
			if slept != tt.wantSleep {
				t.Errorf("slept %s, want %s", slept, tt.wantSleep)
			}
		})
	}
}

func TestMapperSkipsRediscoveryAnotherLookupAlreadyDid(t *testing.T) {
	cached, _ := staleDiscovery(t)
	m := NewMapper(cached).(*rediscoveringMapper)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { return now }
	m.sleep = func(time.Duration) { t.Error("slept although a refresh after the lookup already happened") }
	asked := now.Add(-10 * time.Millisecond)
	m.lastReset = now
	m.rediscover(asked)
	if !m.lastReset.Equal(now) {
		t.Errorf("lastReset moved to %s", m.lastReset)
	}
}

func TestMapperKeepsAMissingKindAnError(t *testing.T) {
	cached, _ := staleDiscovery(t)
	m := NewMapper(cached).(*rediscoveringMapper)
	m.sleep = func(time.Duration) {}
	if _, err := m.RESTMapping(gadgetKind); !meta.IsNoMatchError(err) {
		t.Fatalf("RESTMapping of a kind nobody serves = %v, want a no-match error", err)
	}
}
