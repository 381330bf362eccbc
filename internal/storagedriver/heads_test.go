package storagedriver

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// secretRequests records the requests for Secrets: method, name (or
// "list") and whether the answer was metadata only.
type secretRequests struct {
	mu   sync.Mutex
	seen []string
	next http.RoundTripper
}

func (r *secretRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	if path := req.URL.Path; strings.Contains(path, "/secrets") {
		what := "list"
		if _, name, ok := strings.Cut(path, "/secrets/"); ok {
			what = name
		}
		if strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadataList") {
			what += " (metadata)"
		}
		r.mu.Lock()
		r.seen = append(r.seen, req.Method+" "+what)
		r.mu.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *secretRequests) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// TestNewestReadsOnlyTheNewestRecord: of a release with three revisions,
// Newest lists the metadata and reads the newest record alone; once it is
// cached, a read with nothing changed lists the metadata and reads no
// record; after a new revision it reads that one only (issue 32: a no-op
// reconcile used to carry every stored revision over the wire).
func TestNewestReadsOnlyTheNewestRecord(t *testing.T) {
	const ns = "newest-heads"
	cfg := rest.CopyConfig(sharedAPIServer.Config(t))
	seen := &secretRequests{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { seen.next = rt; return seen })
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	envtestserver.CreateNamespaces(t, cs, ns)
	ours := NewSecrets(cs.CoreV1().Secrets(ns)).WithDecoded(NewDecoded(DefaultDecodedBudget)).WithMetadata(secretHeads(t, cfg, ns))
	key := func(v int) string { return fmt.Sprintf("sh.helm.release.v1.podinfo.v%d", v) }
	for v := 1; v <= 3; v++ {
		mustWrite(t, ours.Create, key(v), podinfoRelease(t, v, common.StatusDeployed))
	}
	seen.take()

	reads := []struct {
		name    string
		before  func(t *testing.T)
		version int
		want    []string
	}{
		{name: "first read", version: 3, want: []string{"GET list (metadata)", "GET " + key(3)}},
		{name: "nothing changed", version: 3, want: []string{"GET list (metadata)"}},
		{name: "a new revision", version: 4, before: func(t *testing.T) {
			mustWrite(t, ours.Create, key(4), podinfoRelease(t, 4, common.StatusDeployed))
		}, want: []string{"GET list (metadata)", "GET " + key(4)}},
	}
	for _, r := range reads {
		if r.before != nil {
			r.before(t)
			seen.take()
		}
		got, err := ours.Newest("podinfo")
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if v := got.(*releasev1.Release).Version; v != r.version {
			t.Errorf("%s: version %d, want %d", r.name, v, r.version)
		}
		if requests := seen.take(); strings.Join(requests, ", ") != strings.Join(r.want, ", ") {
			t.Errorf("%s: requests %q, want %q", r.name, requests, r.want)
		}
	}
}
