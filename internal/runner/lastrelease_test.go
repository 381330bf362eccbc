package runner

import (
	"context"
	"testing"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
)

// queryCounter counts the storage reads LastRelease makes.
type queryCounter struct {
	driver.Driver
	queries int
}

func (q *queryCounter) Query(labels map[string]string) ([]release.Releaser, error) {
	q.queries++
	return q.Driver.Query(labels)
}

// A reconcile reads (and decodes) the newest revision once, not once per
// question the state machine, the install and the inventory ask; a write
// of its own makes it read again.
func TestLastReleaseIsReadOncePerWrite(t *testing.T) {
	mem := &queryCounter{Driver: driver.NewMemory()}
	writes := &action.WriteLog{}
	cfg := helmaction.NewConfiguration()
	cfg.Releases = storage.Init(writes.Wrap(mem))
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "apps"}}
	h := newRunner(cfg, obj, Settings{})
	h.writes = writes
	rel := func(v int) *releasev1.Release {
		return &releasev1.Release{Name: h.releaseName(), Namespace: "apps", Version: v,
			Info: &releasev1.Info{Status: common.StatusDeployed}}
	}
	if err := cfg.Releases.Create(rel(1)); err != nil {
		t.Fatal(err)
	}

	for i := 0; i < 3; i++ {
		got, err := h.LastRelease(context.Background())
		if err != nil || got.Version != 1 {
			t.Fatalf("read %d: v%d, %v", i, got.Version, err)
		}
		got.Info.Status = common.StatusFailed // a caller's change stays its own
	}
	if mem.queries != 1 {
		t.Errorf("%d storage reads for one revision, want 1", mem.queries)
	}
	if got, _ := h.LastRelease(context.Background()); got.Info.Status != common.StatusDeployed {
		t.Errorf("status %s: a caller's change leaked into the next read", got.Info.Status)
	}

	if err := cfg.Releases.Create(rel(2)); err != nil {
		t.Fatal(err)
	}
	got, err := h.LastRelease(context.Background())
	if err != nil || got.Version != 2 {
		t.Fatalf("after a write: v%d, %v; want v2", got.Version, err)
	}
	if mem.queries != 2 {
		t.Errorf("%d storage reads after a write, want 2", mem.queries)
	}
}
