package plan

import (
	"testing"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Only install, upgrade and rollback wait after their hooks.
func TestAfterHooks(t *testing.T) {
	for v, want := range map[Verb]bool{Install: true, Upgrade: true, Rollback: true, Uninstall: false} {
		if got := (Plan{Verb: v, HookOrder: v2.AfterHooks}).AfterHooks(); got != want {
			t.Errorf("%s: %t, want %t", v, got, want)
		}
	}
	if (Plan{Verb: Upgrade, HookOrder: v2.BeforeHooks}).AfterHooks() {
		t.Error("beforeHooks waits after the hooks")
	}
}

// Follow reads the order of the revision, or leaves the plan all at once.
func TestFollow(t *testing.T) {
	p := New(&v2.HelmRelease{}, Uninstall, Settings{Release: "web"})
	if got, err := p.Follow(nil); err != nil || got.Ordering.Ordered() {
		t.Errorf("no revision: %+v, %v", got.Ordering, err)
	}
	chrt, err := sequencing.Record(&chartv2.Chart{Metadata: &chartv2.Metadata{Name: "web"}}, sequencing.Charts{})
	if err != nil {
		t.Fatal(err)
	}
	rel := &releasev1.Release{Name: "web", Version: 3, Chart: chrt, Manifest: "m", ApplyMethod: "ssa"}
	got, err := p.Follow(rel)
	if err != nil || got.Ordering.From != FromRevision || got.Ordering.Manifest != "m" || got.Revision != (Revision{3, "ssa"}) {
		t.Errorf("ordered revision: %+v %+v, %v", got.Ordering, got.Revision, err)
	}
	rollback := New(&v2.HelmRelease{}, Rollback, Settings{Release: "web"})
	if got, _ := rollback.Follow(rel); got.Ordering.Manifest != "" {
		t.Error("a rollback learns the manifest")
	}
}
