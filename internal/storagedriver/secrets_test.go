package storagedriver

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/afterhooks/helm-controller/test/testcharts"
)

// podinfoRelease is a release of the real podinfo chart (the repository's
// copy), with a manifest of the size a render gives.
func podinfoRelease(t testing.TB, version int, status common.Status) *releasev1.Release {
	t.Helper()
	chart, err := loader.LoadDir(testcharts.Podinfo)
	if err != nil {
		t.Fatal(err)
	}
	var manifest strings.Builder
	for _, f := range chart.Templates {
		manifest.WriteString("---\n" + string(f.Data))
	}
	now := time.Unix(1_700_000_000, 0)
	return &releasev1.Release{
		Name: "podinfo", Namespace: "apps", Version: version, Chart: chart, Manifest: manifest.String(),
		Config: map[string]any{"replicaCount": 2},
		Info:   &releasev1.Info{Status: status, FirstDeployed: now, LastDeployed: now, Description: "Install complete"},
		Labels: map[string]string{"team": "payments"},
	}
}

// helmRecord is the Secret Helm's own driver writes for rls.
func helmRecord(t *testing.T, key string, rls *releasev1.Release, update bool) *corev1.Secret {
	t.Helper()
	cs := fake.NewClientset()
	d := driver.NewSecrets(cs.CoreV1().Secrets("store"))
	if err := d.Create(key, rls); err != nil {
		t.Fatal(err)
	}
	if update {
		if err := d.Update(key, rls); err != nil {
			t.Fatal(err)
		}
	}
	s, err := cs.CoreV1().Secrets("store").Get(context.Background(), key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withoutTimes drops the values that depend on when a record was written.
func withoutTimes(labels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range labels {
		if k == "createdAt" || k == "modifiedAt" {
			v = "<time>"
		}
		out[k] = v
	}
	return out
}

// A record we write is the record Helm writes but for its compression:
// same name, type and labels, and Helm's driver reads the release back.
func TestRecordsAreHelms(t *testing.T) {
	for _, update := range []bool{false, true} {
		name := "create"
		if update {
			name = "update"
		}
		t.Run(name, func(t *testing.T) {
			rls := podinfoRelease(t, 3, common.StatusDeployed)
			key := "sh.helm.release.v1.podinfo.v3"
			cs := fake.NewClientset()
			ours := NewSecrets(cs.CoreV1().Secrets("store"))
			if err := ours.Create(key, rls); err != nil {
				t.Fatal(err)
			}
			if update {
				rls.Info.Status = common.StatusSuperseded
				if err := ours.Update(key, rls); err != nil {
					t.Fatal(err)
				}
			}
			got, err := cs.CoreV1().Secrets("store").Get(context.Background(), key, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := helmRecord(t, key, rls, update)
			if got.Name != want.Name || got.Type != want.Type || !reflect.DeepEqual(withoutTimes(got.Labels), withoutTimes(want.Labels)) {
				t.Errorf("record %s %s %v, Helm writes %s %s %v", got.Name, got.Type, got.Labels, want.Name, want.Type, want.Labels)
			}

			read, err := driver.NewSecrets(cs.CoreV1().Secrets("store")).Get(key)
			if err != nil {
				t.Fatalf("Helm's driver cannot read our record: %v", err)
			}
			back, wantJSON := mustJSON(t, read), mustJSON(t, rls)
			if back != wantJSON {
				t.Error("Helm's driver reads another release than the one written")
			}
			t.Logf("record %d bytes; Helm's %d", len(got.Data["release"]), len(want.Data["release"]))
		})
	}
}

func TestCreateOverAnExistingRecord(t *testing.T) {
	cs := fake.NewClientset()
	ours := NewSecrets(cs.CoreV1().Secrets("store"))
	rls := podinfoRelease(t, 1, common.StatusDeployed)
	if err := ours.Create("k", rls); err != nil {
		t.Fatal(err)
	}
	if err := ours.Create("k", rls); !errors.Is(err, driver.ErrReleaseExists) {
		t.Errorf("second create: %v, want driver.ErrReleaseExists", err)
	}
}

// A record that would come close to the Secret size limit is compressed as
// hard as Helm compresses it, so every release Helm can store fits.
func TestLargeRecordsAreCompressedAsHelmDoes(t *testing.T) {
	rls := podinfoRelease(t, 1, common.StatusDeployed)
	// Text that compresses by half at best: hex digits of a fixed
	// pseudo-random sequence.
	rnd := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < 3<<20/2 {
		fmt.Fprintf(&b, "%016x\n", rnd.Uint64())
	}
	rls.Manifest = b.String()
	raw, err := json.Marshal(rls)
	if err != nil {
		t.Fatal(err)
	}
	best, err := compress(raw, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encode(rls)
	if err != nil {
		t.Fatal(err)
	}
	if len(best) <= bestCompressionAbove {
		t.Fatalf("test data too small: %d bytes at best compression", len(best))
	}
	if len(got) != len(best) {
		t.Errorf("large record %d bytes, Helm's compression gives %d", len(got), len(best))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// BenchmarkEncode compares the record encoding with Helm's (best
// compression) on a release of the podinfo chart:
//
//	go test ./internal/storagedriver -run '^$' -bench Encode
func BenchmarkEncode(b *testing.B) {
	rls := podinfoRelease(b, 1, common.StatusDeployed)
	b.Run("ours", func(b *testing.B) {
		for b.Loop() {
			if _, err := encode(rls); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helm-best-compression", func(b *testing.B) {
		for b.Loop() {
			raw, err := json.Marshal(rls)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := compress(raw, gzip.BestCompression); err != nil {
				b.Fatal(err)
			}
		}
	})
}
