package chartsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/opencontainers/go-digest"
	"github.com/prometheus/client_golang/prometheus"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

func TestGetDownloadsVerifiesAndLoads(t *testing.T) {
	tests := []struct {
		name   string
		data   func(t *testing.T) []byte
		digest func(data []byte) string // nil: sha256
	}{
		{
			name: "packaged chart (HelmChart artifact)",
			data: func(t *testing.T) []byte { return packaged(t, "podinfo", "6.1.0") },
		},
		{
			name: "chart extracted from OCI artifact, with directory entries",
			data: func(t *testing.T) []byte { return tarGz(t, chartEntries("podinfo", "6.1.0")...) },
		},
		{
			name:   "sha384 digest",
			data:   func(t *testing.T) []byte { return packaged(t, "podinfo", "6.1.0") },
			digest: func(data []byte) string { return digest.SHA384.FromBytes(data).String() },
		},
		{
			name:   "sha512 digest",
			data:   func(t *testing.T) []byte { return packaged(t, "podinfo", "6.1.0") },
			digest: func(data []byte) string { return digest.SHA512.FromBytes(data).String() },
		},
		{
			// source-controller --artifact-digest-algo=blake3
			name:   "blake3 digest",
			data:   func(t *testing.T) []byte { return packaged(t, "podinfo", "6.1.0") },
			digest: func(data []byte) string { return digest.BLAKE3.FromBytes(data).String() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeSourceController(t)
			data := tt.data(t)
			a := srv.add("/helmchart/apps/podinfo/podinfo-6.1.0.tgz", data)
			if tt.digest != nil {
				a.Digest = tt.digest(data)
			}
			s := newTestSource(Options{})

			c, err := s.Get(context.Background(), owner("podinfo"), a)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if c.Digest != a.Digest || c.Revision != a.Revision {
				t.Errorf("got digest %q revision %q, want %q %q", c.Digest, c.Revision, a.Digest, a.Revision)
			}
			if c.Metadata == nil || c.Metadata.Name != "podinfo" || c.Metadata.Version != "6.1.0" {
				t.Errorf("metadata = %+v, want podinfo 6.1.0", c.Metadata)
			}
			loaded, err := c.Load()
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if loaded.Name() != "podinfo" || len(loaded.Templates) != 1 || loaded.Templates[0].Name != "templates/configmap.yaml" {
				t.Errorf("loaded chart %q with templates %v", loaded.Name(), loaded.Templates)
			}
			if got := fmt.Sprint(loaded.Values["replicas"]); got != "2" {
				t.Errorf("values.replicas = %s, want 2", got)
			}
			want := Stats{Downloads: 1, Loads: 2, Hits: 0, Entries: 1} // one validation parse, one Load
			if got := s.Stats(); got != want {
				t.Errorf("Stats = %+v, want %+v", got, want)
			}
			if n := srv.count(a.Path); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func TestGetErrors(t *testing.T) {
	const path = "/helmchart/apps/app/app-1.0.0.tgz"
	valid := func(t *testing.T) []byte { return tarGz(t, chartEntries("app", "1.0.0")...) }
	tests := []struct {
		name     string
		data     func(t *testing.T) []byte // served at path; nil serves nothing (404)
		artifact func(a *meta.Artifact) *meta.Artifact
		setup    func(srv *fakeSourceController, s *Source)
		retries  int
		wantIs   error
		wantMsg  []string
		requests int // per Get
	}{
		{
			name:     "no artifact",
			artifact: func(*meta.Artifact) *meta.Artifact { return nil },
			wantMsg:  []string{"no artifact"},
		},
		{
			name:     "empty digest",
			data:     valid,
			artifact: func(a *meta.Artifact) *meta.Artifact { a.Digest = ""; return a },
			wantMsg:  []string{"has no digest"},
		},
		{
			name:     "malformed digest",
			data:     valid,
			artifact: func(a *meta.Artifact) *meta.Artifact { a.Digest = "sha256:nothex"; return a },
			wantMsg:  []string{`invalid digest "sha256:nothex"`},
		},
		{
			name: "unsupported digest algorithm",
			data: valid,
			artifact: func(a *meta.Artifact) *meta.Artifact {
				a.Digest = "md5:" + strings.Repeat("ab", 16)
				return a
			},
			wantMsg: []string{`algorithm "md5" is not supported`},
		},
		{
			name: "digest mismatch",
			data: valid,
			artifact: func(a *meta.Artifact) *meta.Artifact {
				a.Digest = digest.FromString("something else").String()
				return a
			},
			wantIs:   ErrDigestMismatch,
			wantMsg:  []string{digest.FromString("something else").String(), "got sha256:"},
			requests: 1,
		},
		{
			name:     "not found is not retried",
			retries:  3,
			wantIs:   ErrNotFound,
			wantMsg:  []string{"404", path},
			requests: 1,
		},
		{
			name:     "server error after retries are exhausted",
			data:     valid,
			retries:  2,
			setup:    func(srv *fakeSourceController, _ *Source) { srv.setScript(path, 500, 500, 500, 500, 500, 500) },
			wantMsg:  []string{"500", path, "gave up after 3 attempts"},
			requests: 3,
		},
		{
			name:     "corrupt archive",
			data:     func(*testing.T) []byte { return []byte("junk") },
			wantMsg:  []string{"loading chart from artifact rev-" + path, "not a gzipped tar archive"},
			requests: 1,
		},
		{
			name: "truncated archive",
			data: func(t *testing.T) []byte {
				b := tarGz(t, chartEntries("app", "1.0.0")...)
				return b[:len(b)/2]
			},
			wantMsg:  []string{"loading chart from artifact rev-" + path, "reading chart archive"},
			requests: 1,
		},
		{
			name:     "archive without Chart.yaml",
			data:     func(t *testing.T) []byte { return tarGz(t, tarEntry{name: "app/values.yaml", body: "a: 1\n"}) },
			wantMsg:  []string{"loading chart from artifact", "Chart.yaml file is missing"},
			requests: 1,
		},
		{
			name: "invalid chart metadata",
			data: func(t *testing.T) []byte {
				return tarGz(t, tarEntry{name: "app/Chart.yaml", body: "apiVersion: v2\nname: app\n"})
			},
			wantMsg:  []string{"loading chart from artifact", "version is required"},
			requests: 1,
		},
		{
			name: "chart API v3",
			data: func(t *testing.T) []byte {
				return tarGz(t, tarEntry{name: "app/Chart.yaml", body: "apiVersion: v3\nname: app\nversion: 1.0.0\n"})
			},
			wantMsg:  []string{`chart apiVersion "v3" is not supported`},
			requests: 1,
		},
		{
			name:     "archive too large is not retried",
			data:     valid,
			retries:  3,
			setup:    func(_ *fakeSourceController, s *Source) { s.maxSize = 64 },
			wantIs:   errTooLarge,
			wantMsg:  []string{"exceed the limit of 64 bytes"},
			requests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeSourceController(t)
			a := &meta.Artifact{URL: srv.URL + path, Path: path, Revision: "rev-" + path, Digest: digest.FromString("x").String()}
			if tt.data != nil {
				a = srv.add(path, tt.data(t))
			}
			if tt.artifact != nil {
				a = tt.artifact(a)
			}
			s := newTestSource(Options{Retries: tt.retries})
			if tt.setup != nil {
				tt.setup(srv, s)
			}

			// Twice: a failure must not be cached.
			for i := 1; i <= 2; i++ {
				c, err := s.Get(context.Background(), owner("app"), a)
				if err == nil {
					t.Fatalf("Get #%d returned %+v, want error", i, c)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("error %q is not %v", err, tt.wantIs)
				}
				if tt.wantIs != ErrNotFound && errors.Is(err, ErrNotFound) {
					t.Errorf("error %q unexpectedly matches ErrNotFound", err)
				}
				for _, m := range tt.wantMsg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not contain %q", err, m)
					}
				}
				if n := srv.count(path); n != tt.requests*i {
					t.Errorf("after Get #%d server saw %d requests, want %d", i, n, tt.requests*i)
				}
			}
			if st := s.Stats(); st.Entries != 0 || st.Hits != 0 {
				t.Errorf("Stats = %+v, want nothing cached", st)
			}
			if len(s.owners) != 0 {
				t.Errorf("owners = %v, want none recorded for a failed Get", s.owners)
			}
		})
	}
}

func TestStatusErrorCarriesCodeAndURL(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/gone.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	srv.setScript("/gone.tgz", http.StatusForbidden)
	_, err := newTestSource(Options{Retries: 3}).Get(context.Background(), owner("app"), a)

	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *StatusError", err)
	}
	if se.StatusCode != http.StatusForbidden || se.URL != a.URL {
		t.Errorf("StatusError = %+v, want 403 for %s", se, a.URL)
	}
	if errors.Is(err, ErrNotFound) {
		t.Error("403 must not match ErrNotFound")
	}
	if n := srv.count("/gone.tgz"); n != 1 {
		t.Errorf("4xx retried: %d requests", n)
	}
}

func TestGetServesRepeatsFromCache(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/podinfo.tgz", packaged(t, "podinfo", "6.1.0"))
	s := newTestSource(Options{})
	ctx := context.Background()

	if _, err := s.Get(ctx, owner("one"), a); err != nil {
		t.Fatal(err)
	}
	loadsAfterDownload := s.Stats().Loads

	// Same content under another revision, as with two OCI tags.
	other := *a
	other.Revision = "6.1.0@" + a.Digest
	for _, tc := range []struct {
		owner    string
		artifact *meta.Artifact
	}{{"one", a}, {"two", a}, {"two", &other}} {
		c, err := s.Get(ctx, owner(tc.owner), tc.artifact)
		if err != nil {
			t.Fatal(err)
		}
		if c.Revision != tc.artifact.Revision {
			t.Errorf("Revision = %q, want %q", c.Revision, tc.artifact.Revision)
		}
	}

	if n := srv.count("/podinfo.tgz"); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	st := s.Stats()
	if st.Downloads != 1 || st.Hits != 3 || st.Entries != 1 {
		t.Errorf("Stats = %+v, want 1 download, 3 hits, 1 entry", st)
	}
	if st.Loads != loadsAfterDownload {
		t.Errorf("cache hits parsed the chart: Loads %d -> %d", loadsAfterDownload, st.Loads)
	}
}

func TestLoadReturnsIndependentCharts(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/podinfo.tgz", packaged(t, "podinfo", "6.1.0"))
	s := newTestSource(Options{})
	c, err := s.Get(context.Background(), owner("podinfo"), a)
	if err != nil {
		t.Fatal(err)
	}

	first, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	// What Helm actions do to a chart, and worse.
	first.Metadata.Name = "mutated"
	first.Metadata.Version = "9.9.9"
	first.Values["replicas"] = 99
	first.Templates[0].Data = []byte("garbage")
	first.Templates = nil

	again, err := s.Get(context.Background(), owner("podinfo"), a)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Load()
	if err != nil {
		t.Fatal(err)
	}
	fromHit, err := again.Load()
	if err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]*chartv2.Chart{"second Load": second, "Load after a cache hit": fromHit} {
		if ch == first || ch.Metadata == first.Metadata {
			t.Errorf("%s: shares data with the first chart", name)
		}
		if ch.Name() != "podinfo" || ch.Metadata.Version != "6.1.0" || len(ch.Templates) != 1 ||
			string(ch.Templates[0].Data) != configMap || fmt.Sprint(ch.Values["replicas"]) != "2" {
			t.Errorf("%s: changed by mutating another copy: %s %s, %d templates, values %v",
				name, ch.Name(), ch.Metadata.Version, len(ch.Templates), ch.Values)
		}
	}
	if c.Metadata.Name != "podinfo" || c.Metadata.Version != "6.1.0" {
		t.Errorf("cached metadata changed to %s %s", c.Metadata.Name, c.Metadata.Version)
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		script   []int
		retries  int
		wantErr  bool
		requests int
	}{
		{name: "two 500s then success", script: []int{500, 500}, retries: 3, requests: 3},
		{name: "503 then success", script: []int{503}, retries: 1, requests: 2},
		{name: "connection broken mid-body then success", script: []int{truncate}, retries: 1, requests: 2},
		{name: "more failures than retries", script: []int{500, 502, 500}, retries: 2, wantErr: true, requests: 3},
		{name: "no retries", script: []int{500}, retries: 0, wantErr: true, requests: 1},
		{name: "404 in between ends retrying", script: []int{500, 404}, retries: 5, wantErr: true, requests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeSourceController(t)
			a := srv.add("/app.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
			srv.setScript("/app.tgz", tt.script...)
			s := newTestSource(Options{Retries: tt.retries})

			c, err := s.Get(context.Background(), owner("app"), a)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("Get error = %v, want error: %v", err, tt.wantErr)
			}
			if err == nil && c.Metadata.Name != "app" {
				t.Errorf("got chart %q", c.Metadata.Name)
			}
			if n := srv.count("/app.tgz"); n != tt.requests {
				t.Errorf("server saw %d requests, want %d", n, tt.requests)
			}
		})
	}
}

func TestGetTimeout(t *testing.T) {
	for _, retries := range []int{0, 1} {
		t.Run(fmt.Sprintf("retries=%d", retries), func(t *testing.T) {
			srv := newFakeSourceController(t)
			a := srv.add("/slow.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
			srv.setHook(func(r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			})
			s := newTestSource(Options{Retries: retries, Timeout: 50 * time.Millisecond})

			start := time.Now()
			_, err := s.Get(context.Background(), owner("app"), a)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("error = %v, want a timeout", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("Get took %v", d)
			}
			if n := srv.count("/slow.tgz"); n != retries+1 {
				t.Errorf("server saw %d requests, want %d", n, retries+1)
			}
		})
	}
}

// blockServer makes the fake source-controller hold requests until the
// returned function is called.
func blockServer(t *testing.T, srv *fakeSourceController) (release func()) {
	gate := make(chan struct{})
	var once sync.Once
	srv.setHook(func(*http.Request) { <-gate })
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

func TestGetRespectsCancellation(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/app.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	blockServer(t, srv)
	s := newTestSource(Options{Retries: 9})

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitFor(t, "request", func() bool { return srv.count("/app.tgz") == 1 })
		cancel()
	}()
	_, err := s.Get(ctx, owner("app"), a)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	s.mu.Lock()
	flights := len(s.flights)
	s.mu.Unlock()
	if flights != 0 {
		t.Errorf("%d downloads still registered after the only waiter left", flights)
	}
}

func TestCancelledWaiterDoesNotFailOthers(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/app.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	release := blockServer(t, srv)
	s := newTestSource(Options{})

	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, err := s.Get(leaderCtx, owner("leader"), a)
		leaderErr <- err
	}()
	waitFor(t, "leader to start the download", func() bool { return s.waiters(a.Digest) == 1 })

	type result struct {
		c   *Chart
		err error
	}
	follower := make(chan result, 1)
	go func() {
		c, err := s.Get(context.Background(), owner("follower"), a)
		follower <- result{c, err}
	}()
	waitFor(t, "follower to join", func() bool { return s.waiters(a.Digest) == 2 })

	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("leader error = %v, want context.Canceled", err)
	}
	release()
	r := <-follower
	if r.err != nil {
		t.Fatalf("follower failed with the leader's cancellation: %v", r.err)
	}
	if n := srv.count("/app.tgz"); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.owners[owner("leader")]; ok {
		t.Error("cancelled leader recorded as owner")
	}
	if s.owners[owner("follower")] != a.Digest {
		t.Error("follower not recorded as owner")
	}
}

func TestConcurrentGetsDownloadOnce(t *testing.T) {
	const n = 8
	srv := newFakeSourceController(t)
	a := srv.add("/app.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	release := blockServer(t, srv)
	s := newTestSource(Options{})

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			c, err := s.Get(context.Background(), owner(fmt.Sprint("app-", i)), a)
			if err == nil && c.Metadata.Name != "app" {
				err = fmt.Errorf("got chart %q", c.Metadata.Name)
			}
			errs <- err
		})
	}
	waitFor(t, "all Gets to wait for one download", func() bool { return s.waiters(a.Digest) == n })
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := srv.count("/app.tgz"); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
	if st := s.Stats(); st.Downloads != 1 || st.Loads != 1 || st.Entries != 1 {
		t.Errorf("Stats = %+v, want 1 download, 1 load, 1 entry", st)
	}
	if u := s.users[a.Digest]; u != n {
		t.Errorf("digest has %d owners, want %d", u, n)
	}
}

// TestConcurrentOwners exercises Get and Forget from many goroutines for the
// race detector, and checks the bookkeeping adds up afterwards.
func TestConcurrentOwners(t *testing.T) {
	srv := newFakeSourceController(t)
	var artifacts []*meta.Artifact
	for v := range 3 {
		artifacts = append(artifacts, srv.add(fmt.Sprintf("/app-%d.tgz", v), tarGz(t, chartEntries("app", fmt.Sprintf("1.0.%d", v))...)))
	}
	s := newTestSource(Options{MaxEntries: 2})

	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			o := owner(fmt.Sprint("app-", g))
			for i := range 20 {
				if _, err := s.Get(context.Background(), o, artifacts[(g+i)%len(artifacts)]); err != nil {
					t.Error(err)
					return
				}
				if i%7 == 0 {
					s.Forget(o)
				}
				_ = s.Stats()
			}
			s.Forget(o)
		})
	}
	wg.Wait()
	if st := s.Stats(); st.Entries != 0 {
		t.Errorf("Stats = %+v, want no entries once every owner is forgotten", st)
	}
	if len(s.users) != 0 || len(s.owners) != 0 {
		t.Errorf("leftover bookkeeping: users %v owners %v", s.users, s.owners)
	}
}

func TestOwnership(t *testing.T) {
	srv := newFakeSourceController(t)
	x := srv.add("/app-1.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	y := srv.add("/app-2.tgz", tarGz(t, chartEntries("app", "2.0.0")...))
	s := newTestSource(Options{})

	steps := []struct {
		desc          string
		get           *meta.Artifact // nil: Forget
		owner         string
		wantEntries   int
		wantDownloads uint64
	}{
		{"a uses X", x, "a", 1, 1},
		{"b shares X", x, "b", 1, 1},
		{"a moves to Y; X kept for b", y, "a", 2, 2},
		{"b moves to Y; X evicted", y, "b", 1, 2},
		{"c needs X again: downloaded again", x, "c", 2, 3},
		{"c deleted", nil, "c", 1, 3},
		{"a deleted; b still uses Y", nil, "a", 1, 3},
		{"unknown owner forgotten", nil, "nobody", 1, 3},
		{"b deleted", nil, "b", 0, 3},
		{"Forget is idempotent", nil, "b", 0, 3},
	}
	for _, st := range steps {
		if st.get != nil {
			if _, err := s.Get(context.Background(), owner(st.owner), st.get); err != nil {
				t.Fatalf("%s: %v", st.desc, err)
			}
		} else {
			s.Forget(owner(st.owner))
		}
		if got := s.Stats(); got.Entries != st.wantEntries || got.Downloads != st.wantDownloads {
			t.Errorf("%s: Stats = %+v, want %d entries, %d downloads", st.desc, got, st.wantEntries, st.wantDownloads)
		}
	}
}

func TestLRUBound(t *testing.T) {
	srv := newFakeSourceController(t)
	art := map[string]*meta.Artifact{}
	for i, name := range []string{"x", "y", "z"} {
		art[name] = srv.add("/"+name+".tgz", tarGz(t, chartEntries(name, fmt.Sprintf("1.0.%d", i))...))
	}
	s := newTestSource(Options{MaxEntries: 2})

	steps := []struct {
		owner, artifact string
		wantDownloads   uint64
	}{
		{"a", "x", 1},
		{"b", "y", 2},
		{"a", "x", 2}, // hit; x is now the most recently used
		{"c", "z", 3}, // evicts y although b owns it
		{"a", "x", 3}, // still cached
		{"b", "y", 4}, // downloaded again; evicts z
		{"c", "z", 5},
	}
	for i, st := range steps {
		if _, err := s.Get(context.Background(), owner(st.owner), art[st.artifact]); err != nil {
			t.Fatal(err)
		}
		got := s.Stats()
		if got.Downloads != st.wantDownloads || got.Entries > 2 {
			t.Errorf("step %d (%s gets %s): Stats = %+v, want %d downloads and at most 2 entries",
				i, st.owner, st.artifact, got, st.wantDownloads)
		}
	}
}

func TestHostOverride(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/helmchart/apps/app/app-1.0.0.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	// What the status advertises is unreachable from here (port 1 refuses).
	a.URL = "http://127.0.0.1:1/helmchart/apps/app/app-1.0.0.tgz"

	tests := []struct {
		name     string
		override string
		wantErr  bool
	}{
		{name: "override reaches the server", override: srv.Listener.Addr().String()},
		{name: "without override the advertised host is used", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestSource(Options{HostOverride: tt.override})
			_, err := s.Get(context.Background(), owner("app"), a)
			if gotErr := err != nil; gotErr != tt.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tt.wantErr)
			}
		})
	}
}

// TestMetrics: the chart cache serves Flux's cache metrics (fluxcd/pkg/cache
// with the gotk_chart_ prefix) with a hit or miss per HelmRelease, and our
// downloads counter; a forgotten HelmRelease's series go away.
func TestMetrics(t *testing.T) {
	srv := newFakeSourceController(t)
	a := srv.add("/app.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	s := newTestSource(Options{})
	reg := prometheus.NewRegistry()
	s.MustRegisterMetrics(reg)

	// gather keys each series by its name and its label values.
	gather := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				key := mf.GetName()
				for _, l := range m.GetLabel() {
					key += " " + l.GetName() + "=" + l.GetValue()
				}
				switch {
				case m.GetCounter() != nil:
					got[key] = m.GetCounter().GetValue()
				case m.GetGauge() != nil:
					got[key] = m.GetGauge().GetValue()
				}
			}
		}
		return got
	}

	for range 3 {
		if _, err := s.Get(context.Background(), owner("app"), a); err != nil {
			t.Fatal(err)
		}
	}
	events := "gotk_chart_cache_events_total event_type=%s kind=HelmRelease name=app namespace=%s operation=reconcile"
	ns := owner("app").Namespace
	got := gather()
	for key, want := range map[string]float64{
		"helm_controller_chart_downloads_total": 1,
		fmt.Sprintf(events, "cache_hit", ns):    2,
		fmt.Sprintf(events, "cache_miss", ns):   1,
		"gotk_chart_cached_items":               1,
		"gotk_chart_cache_evictions_total":      0,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
	s.Forget(owner("app"))
	got = gather()
	if got["gotk_chart_cached_items"] != 0 {
		t.Errorf("gotk_chart_cached_items = %v after Forget, want 0", got["gotk_chart_cached_items"])
	}
	for key := range got {
		if strings.HasPrefix(key, "gotk_chart_cache_events_total") {
			t.Errorf("series %s outlived Forget", key)
		}
	}
}

// Current is true only for the owner's digest of its last successful Get,
// compared as given: another digest, an empty one, one that does not parse
// or another owner's is not current.
func TestCurrent(t *testing.T) {
	srv := newFakeSourceController(t)
	x := srv.add("/app-1.tgz", tarGz(t, chartEntries("app", "1.0.0")...))
	y := srv.add("/app-2.tgz", tarGz(t, chartEntries("app", "2.0.0")...))
	s := newTestSource(Options{})
	if _, err := s.Get(context.Background(), owner("a"), x); err != nil {
		t.Fatal(err)
	}
	withDigest := func(a *meta.Artifact, digest string) *meta.Artifact {
		c := *a
		c.Digest = digest
		return &c
	}
	tests := []struct {
		name     string
		owner    string
		artifact *meta.Artifact
		want     bool
	}{
		{"the digest of the last Get", "a", x, true},
		{"same digest, another revision", "a", &meta.Artifact{Digest: x.Digest, Revision: "other"}, true},
		{"another digest", "a", y, false},
		{"another owner", "b", x, false},
		{"no artifact", "a", nil, false},
		{"empty digest", "a", withDigest(x, ""), false},
		{"a digest that does not parse", "a", withDigest(x, "sha256:not-hex"), false},
		{"the digest in upper case", "a", withDigest(x, strings.ToUpper(x.Digest)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Current(owner(tc.owner), tc.artifact); got != tc.want {
				t.Errorf("Current = %t, want %t", got, tc.want)
			}
		})
	}
	// A failed Get leaves the owner on its digest.
	if _, err := s.Get(context.Background(), owner("a"), withDigest(y, "sha256:not-hex")); err == nil {
		t.Fatal("Get of a digest that does not parse succeeded")
	}
	if !s.Current(owner("a"), x) {
		t.Error("a failed Get moved the owner off its digest")
	}
}
