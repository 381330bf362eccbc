package storagedriver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// TestDecodedNeverServesAStaleRecord: the release records change behind
// the reader's back, written by Helm's own driver as the helm CLI writes
// them (an upgrade by hand, a record edited in place, a rollback, a
// revision deleted, a record deleted and written again with the same
// name), on a real API server. After each change the cached Newest reads
// what Helm reads, and a read with nothing changed comes from the cache.
// Newest reads either way: the records' metadata, then the newest record
// (the controller's), or the whole records.
func TestDecodedNeverServesAStaleRecord(t *testing.T) {
	t.Run("metadata, then the newest record", func(t *testing.T) { neverStale(t, "stale-records-heads", true) })
	t.Run("whole records", func(t *testing.T) { neverStale(t, "stale-records", false) })
}

func neverStale(t *testing.T, ns string, heads bool) {
	cfg := sharedAPIServer.Config(t)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	envtestserver.CreateNamespaces(t, cs, ns)
	secrets := cs.CoreV1().Secrets(ns)
	helms := driver.NewSecrets(secrets)
	cache := NewDecoded(DefaultDecodedBudget)
	ours := NewSecrets(secrets).WithDecoded(cache)
	if heads {
		ours.WithMetadata(secretHeads(t, cfg, ns))
	}

	key := func(v int) string { return fmt.Sprintf("sh.helm.release.v1.podinfo.v%d", v) }
	if err := ours.Create(key(1), podinfoRelease(t, 1, common.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	changes := []struct {
		name   string
		change func(t *testing.T)
		want   string // version/status/description
	}{
		{name: "nothing changed", change: func(*testing.T) {}, want: "1/deployed/Install complete"},
		{name: "an upgrade by hand", change: func(t *testing.T) {
			mustWrite(t, helms.Update, key(1), withStatus(podinfoRelease(t, 1, common.StatusSuperseded), "Install complete"))
			mustWrite(t, helms.Create, key(2), withStatus(podinfoRelease(t, 2, common.StatusDeployed), "Upgrade complete"))
		}, want: "2/deployed/Upgrade complete"},
		{name: "the newest record changed in place", change: func(t *testing.T) {
			mustWrite(t, helms.Update, key(2), withStatus(podinfoRelease(t, 2, common.StatusFailed), "Upgrade failed by hand"))
		}, want: "2/failed/Upgrade failed by hand"},
		{name: "a rollback by hand", change: func(t *testing.T) {
			mustWrite(t, helms.Create, key(3), withStatus(podinfoRelease(t, 3, common.StatusDeployed), "Rollback to 1"))
		}, want: "3/deployed/Rollback to 1"},
		{name: "the newest revision deleted", change: func(t *testing.T) {
			if err := secrets.Delete(context.Background(), key(3), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: "2/failed/Upgrade failed by hand"},
		{name: "deleted and written again under the same name", change: func(t *testing.T) {
			if err := secrets.Delete(context.Background(), key(2), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, helms.Create, key(2), withStatus(podinfoRelease(t, 2, common.StatusDeployed), "Upgrade complete again"))
		}, want: "2/deployed/Upgrade complete again"},
	}
	for _, tc := range changes {
		t.Run(tc.name, func(t *testing.T) {
			// Read before the change, so the cache holds the record the
			// change replaces.
			if _, err := ours.Newest("podinfo"); err != nil {
				t.Fatal(err)
			}
			tc.change(t)
			for _, read := range []string{"first read after the change", "second read"} {
				hitsBefore, _ := cache.Stats()
				got, err := ours.Newest("podinfo")
				if err != nil {
					t.Fatalf("%s: %v", read, err)
				}
				want, err := helmsNewest(t, secrets, "podinfo")
				if err != nil {
					t.Fatal(err)
				}
				rls := got.(*releasev1.Release)
				if summary(rls) != tc.want || summary(want) != tc.want {
					t.Fatalf("%s: newest %s, Helm reads %s, want %s", read, summary(rls), summary(want), tc.want)
				}
				if mustJSON(t, rls) != mustJSON(t, want) {
					t.Errorf("%s: newest differs from Helm's", read)
				}
				if hits, _ := cache.Stats(); read == "second read" && hits != hitsBefore+1 {
					t.Errorf("an unchanged record was decoded again (hits %d → %d)", hitsBefore, hits)
				}
			}
		})
	}
}

// TestDecodedHandsOutCopies: a caller that changes the status of what it
// read (an unlock marks the release failed) does not change what the next
// reader gets.
func TestDecodedHandsOutCopies(t *testing.T) {
	cache := NewDecoded(DefaultDecodedBudget)
	item := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "7", Labels: map[string]string{"status": "deployed"}}}
	stored := podinfoRelease(t, 1, common.StatusDeployed)
	stored.Hooks = []*releasev1.Hook{{Name: "migrate"}}
	cache.put(item, stored, 100)
	first := cache.get(item)
	first.Info.Status = common.StatusFailed
	first.Labels["status"] = "failed"
	first.Hooks[0].LastRun.Phase = releasev1.HookPhaseFailed
	item.Labels = map[string]string{"status": "deployed"}
	second := cache.get(item)
	if second.Info.Status != common.StatusDeployed || second.Labels["status"] != "deployed" || second.Hooks[0].LastRun.Phase != "" {
		t.Errorf("second read %s with labels %v, hook %q; want what was stored", second.Info.Status, second.Labels, second.Hooks[0].LastRun.Phase)
	}
}

// TestDecodedBudget: the cache keeps at most its budget, dropping the
// records read least recently, and keeps nothing it cannot tell apart
// from later versions.
func TestDecodedBudget(t *testing.T) {
	secret := func(uid, rv string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
	}
	// A record without a chart costs what it is given; records of a chart
	// are TestDecodedKeepsEachChartOnce's.
	rls := podinfoRelease(t, 1, common.StatusDeployed)
	rls.Chart = nil
	tests := []struct {
		name   string
		budget int
		put    []*corev1.Secret
		read   []*corev1.Secret // read in order between the puts and the check
		kept   []string         // UIDs left
	}{
		{name: "within budget", budget: 300, put: []*corev1.Secret{secret("a", "1"), secret("b", "1"), secret("c", "1")}, kept: []string{"a", "b", "c"}},
		{name: "over budget: the oldest goes", budget: 200, put: []*corev1.Secret{secret("a", "1"), secret("b", "1"), secret("c", "1")}, kept: []string{"b", "c"}},
		{name: "a read keeps a record", budget: 200, put: []*corev1.Secret{secret("a", "1"), secret("b", "1")},
			read: []*corev1.Secret{secret("a", "1")}, kept: []string{"a", "c"}},
		{name: "a new version replaces the old", budget: 300, put: []*corev1.Secret{secret("a", "1"), secret("a", "2")}, kept: []string{"a"}},
		{name: "no budget", budget: 0, put: []*corev1.Secret{secret("a", "1")}},
		{name: "no UID", budget: 300, put: []*corev1.Secret{secret("", "1")}},
		{name: "no resourceVersion", budget: 300, put: []*corev1.Secret{secret("a", "")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoded(tc.budget)
			for _, s := range tc.put {
				d.put(s, rls, 100)
			}
			for _, s := range tc.read {
				d.get(s)
			}
			if tc.name == "a read keeps a record" {
				d.put(secret("c", "1"), rls, 100)
			}
			var kept []string
			for e := d.order.Front(); e != nil; e = e.Next() {
				kept = append(kept, string(e.Value.(*decodedEntry).uid))
			}
			if strings.Join(slices.Sorted(slices.Values(kept)), ",") != strings.Join(tc.kept, ",") {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
			if d.size != 100*len(tc.kept) {
				t.Errorf("size %d, want %d", d.size, 100*len(tc.kept))
			}
		})
	}
}

func withStatus(rls *releasev1.Release, description string) *releasev1.Release {
	rls.Info.Description = description
	return rls
}

func mustWrite(t *testing.T, write func(string, release.Releaser) error, key string, rls *releasev1.Release) {
	t.Helper()
	if err := write(key, rls); err != nil {
		t.Fatal(err)
	}
}

func summary(rls *releasev1.Release) string {
	return fmt.Sprintf("%d/%s/%s", rls.Version, rls.Info.Status, rls.Info.Description)
}

// TestDecodedKeepsEachChartOnce: the records of a fleet of releases made
// from one chart carry that chart each, nearly all of their size. The
// cache keeps one copy of a chart for every record that carries an equal
// one and counts it once against its budget, so that a budget that holds
// three records with their chart holds many more records of that chart;
// a chart that differs in anything is kept apart.
func TestDecodedKeepsEachChartOnce(t *testing.T) {
	decode := func(uid string, rls *releasev1.Release) (*corev1.Secret, *releasev1.Release, int) {
		t.Helper()
		// A rendered podinfo manifest is about 7 KiB; podinfoRelease's
		// holds every template.
		rls.Manifest = rls.Manifest[:min(len(rls.Manifest), 7<<10)]
		item, err := newRecord("sh.helm.release.v1."+uid+".v1", rls, "createdAt")
		if err != nil {
			t.Fatal(err)
		}
		item.UID, item.ResourceVersion = types.UID(uid), "1"
		got, size, err := decodeRecord(item)
		if err != nil {
			t.Fatal(err)
		}
		return item, got, size
	}
	_, _, oneRecord := decode("probe", podinfoRelease(t, 1, common.StatusDeployed))
	cache := NewDecoded(3 * oneRecord)

	var items []*corev1.Secret
	for i := range 20 {
		item, rls, size := decode(fmt.Sprintf("same-%d", i), podinfoRelease(t, 1, common.StatusDeployed))
		cache.put(item, rls, size)
		items = append(items, item)
	}
	first := cache.get(items[0])
	if first == nil {
		t.Fatalf("the first of 20 records of one chart was dropped; a budget of three records should keep them all (size %d of %d)", cache.size, cache.budget)
	}
	for _, item := range items[1:] {
		got := cache.get(item)
		if got == nil {
			t.Fatalf("record %s was dropped (size %d of %d)", item.UID, cache.size, cache.budget)
		}
		if got.Chart != first.Chart {
			t.Errorf("record %s holds a chart of its own, want the one kept for every equal chart", item.UID)
		}
	}

	other := podinfoRelease(t, 1, common.StatusDeployed)
	other.Chart.Templates[0].Data = append(slices.Clone(other.Chart.Templates[0].Data), []byte("\n# edited\n")...)
	item, rls, size := decode("other", other)
	cache.put(item, rls, size)
	if got := cache.get(item); got == nil || got.Chart == first.Chart {
		t.Fatalf("a record of another chart was dropped or given the shared chart")
	}
	if got := cache.get(item); string(got.Chart.Templates[0].Data) != string(other.Chart.Templates[0].Data) {
		t.Errorf("the other chart's template reads %q", got.Chart.Templates[0].Data)
	}

	// Dropping every record of a chart frees what its chart cost.
	small := NewDecoded(oneRecord + oneRecord/2)
	for i := range 3 {
		item, rls, size := decode(fmt.Sprintf("a-%d", i), podinfoRelease(t, 1, common.StatusDeployed))
		small.put(item, rls, size)
	}
	item, rls, size = decode("b", other)
	small.put(item, rls, size)
	if small.get(item) == nil || len(small.charts) != 1 {
		t.Errorf("after a record of another chart pushed out the first chart's records: %d charts kept, want 1", len(small.charts))
	}
	if small.size > small.budget {
		t.Errorf("size %d over budget %d", small.size, small.budget)
	}
}

// secretHeads is the metadata client of Secrets in ns.
func secretHeads(t *testing.T, cfg *rest.Config, ns string) metadata.ResourceInterface {
	t.Helper()
	m, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(ns)
}
