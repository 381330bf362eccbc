package chartsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/opencontainers/go-digest"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"k8s.io/apimachinery/pkg/types"
)

// tarEntry is a file in a hand-made archive; a name ending in "/" is a
// directory entry.
type tarEntry struct {
	name, body string
}

func tarGz(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if e.name[len(e.name)-1] == '/' {
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  replicas: {{ .Values.replicas | quote }}
`

// chartEntries is a chart as source-controller stores an OCI chart it has
// extracted: a top directory, with explicit directory entries.
func chartEntries(name, version string) []tarEntry {
	return []tarEntry{
		{name: name + "/"},
		{name: name + "/Chart.yaml", body: fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version)},
		{name: name + "/values.yaml", body: "replicas: 2\n"},
		{name: name + "/templates/"},
		{name: name + "/templates/configmap.yaml", body: configMap},
	}
}

// packaged is a chart archive as `helm package` (and thus a HelmChart
// artifact) lays it out.
func packaged(t testing.TB, name, version string) []byte {
	t.Helper()
	c := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: name, Version: version},
		Raw:       []*common.File{{Name: "values.yaml", Data: []byte("replicas: 2\n")}},
		Templates: []*common.File{{Name: "templates/configmap.yaml", Data: []byte(configMap)}},
	}
	path, err := chartutil.Save(c, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// fakeSourceController serves artifacts and counts requests per path.
type fakeSourceController struct {
	*httptest.Server

	mu       sync.Mutex
	files    map[string][]byte
	script   map[string][]int // statuses answered before the file; truncate cuts the body short
	requests map[string]int
	hook     func(*http.Request) // runs before answering, e.g. to block
}

const truncate = -1

func newFakeSourceController(t testing.TB) *fakeSourceController {
	f := &fakeSourceController{files: map[string][]byte{}, script: map[string][]int{}, requests: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSourceController) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests[r.URL.Path]++
	hook := f.hook
	data, ok := f.files[r.URL.Path]
	status := http.StatusOK
	if s := f.script[r.URL.Path]; len(s) > 0 {
		status, f.script[r.URL.Path] = s[0], s[1:]
	}
	f.mu.Unlock()

	if hook != nil {
		hook(r)
	}
	switch {
	case !ok:
		http.NotFound(w, r)
	case status == truncate:
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = w.Write(data[:len(data)/2])
	case status != http.StatusOK:
		http.Error(w, http.StatusText(status), status)
	default:
		_, _ = w.Write(data)
	}
}

// add serves data at path and returns the artifact pointing at it.
func (f *fakeSourceController) add(path string, data []byte) *meta.Artifact {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[path] = data
	return &meta.Artifact{
		Path:     path,
		URL:      f.URL + path,
		Revision: "rev-" + path,
		Digest:   digest.FromBytes(data).String(),
	}
}

func (f *fakeSourceController) setScript(path string, statuses ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script[path] = statuses
}

func (f *fakeSourceController) setHook(h func(*http.Request)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

func (f *fakeSourceController) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

// newTestSource keeps retry backoff short so that tests stay fast.
func newTestSource(opts Options) *Source {
	s := New(opts)
	s.client.RetryWaitMin = time.Millisecond
	s.client.RetryWaitMax = 5 * time.Millisecond
	return s
}

func owner(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "apps", Name: name}
}

// waitFor polls cond, failing the test if it does not hold within 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *Source) waiters(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.flights[key]; ok {
		return f.waiters
	}
	return 0
}
