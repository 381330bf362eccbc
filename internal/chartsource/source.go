// Package chartsource fetches the chart artifacts that source-controller
// serves over HTTP and keeps them cached by digest.
//
// An artifact is identified by its digest, so a cached archive can be reused
// for as long as a HelmRelease keeps pointing at the same digest: reconciling
// an unchanged revision then costs neither a download nor a verification.
// Entries are tied to the HelmReleases that use them, so memory is released
// as soon as no release needs a revision any more, and an LRU bound caps the
// total in case many releases use distinct charts.
package chartsource

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/cache"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/opencontainers/go-digest"
	"k8s.io/apimachinery/pkg/types"
)

const (
	defaultMaxEntries = 64
	defaultTimeout    = 30 * time.Second
	// maxArchiveSize bounds the memory a single download may take. Helm's
	// own loader further limits the decompressed size of a chart.
	maxArchiveSize = 100 << 20
)

// Options configures a Source.
type Options struct {
	// Retries is how often a download is retried after a network error or
	// a 5xx response. A 404 is final: the artifact is gone and retrying
	// would only delay the error.
	Retries int
	// Timeout limits a single download attempt, including reading the body.
	// Zero means 30s, so a hanging server can never block a reconciler.
	Timeout time.Duration
	// MaxEntries bounds the number of cached archives; zero means 64.
	MaxEntries int
	// HostOverride replaces the host:port of artifact URLs, for running the
	// controller outside the cluster against a port-forwarded
	// source-controller. Empty keeps the URL as advertised.
	HostOverride string
}

// Stats are cumulative counters, useful in tests and for debugging.
type Stats struct {
	// Downloads counts artifacts fetched from source-controller.
	Downloads uint64
	// Loads counts parses of an archive into a chart.
	Loads uint64
	// Hits counts Get calls answered from the cache.
	Hits uint64
	// Entries is the current number of cached archives.
	Entries int
}

// Source is safe for concurrent use.
type Source struct {
	client       *retryablehttp.Client
	hostOverride string
	maxSize      int64
	maxEntries   int

	mu sync.Mutex
	// entries are the cached charts by digest, bounded by maxEntries:
	// Flux's LRU cache, whose metrics are Flux's (see MustRegisterMetrics).
	entries *cache.LRU[*Chart]
	owners  map[types.NamespacedName]string
	users   map[string]int // owners per digest; outlives LRU eviction
	flights map[string]*flight

	downloads, loads, hits atomic.Uint64
}

// flight is a download in progress that concurrent Gets of the same digest
// share.
type flight struct {
	done    chan struct{}
	cancel  context.CancelFunc
	waiters int // guarded by Source.mu

	// Written before done is closed.
	chart *Chart
	err   error
}

// New does not register metrics; see MustRegisterMetrics.
func New(opts Options) *Source {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = defaultMaxEntries
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	if opts.Retries < 0 {
		opts.Retries = 0
	}
	return &Source{
		client:       newClient(opts.Retries, opts.Timeout),
		hostOverride: opts.HostOverride,
		maxSize:      maxArchiveSize,
		maxEntries:   opts.MaxEntries,
		entries:      newEntries(opts.MaxEntries),
		owners:       map[types.NamespacedName]string{},
		users:        map[string]int{},
		flights:      map[string]*flight{},
	}
}

// Get returns the chart of the artifact, downloading it only when its digest
// is not cached, and records that owner now uses this digest. An entry is
// evicted once its last owner has moved to another digest or been forgotten.
//
// A failed Get leaves the owner on its previous digest, so that entry stays
// cached for the next attempt.
//
// The returned Chart's metadata is shared with the cache and must be treated
// as read-only; call Load for a chart that may be modified.
func (s *Source) Get(ctx context.Context, owner types.NamespacedName, artifact *meta.Artifact) (*Chart, error) {
	if artifact == nil {
		return nil, errors.New("source has no artifact")
	}
	s.mu.Lock()
	// Only digests that parsed are ever cached, so a hit needs no parse
	// (a regular expression on every reconcile of a settled fleet).
	if c, ok := s.lookup(artifact.Digest); ok {
		s.hits.Add(1)
		s.recordEvent(cache.CacheEventTypeHit, owner)
		s.use(owner, artifact.Digest)
		s.mu.Unlock()
		return c.withRevision(artifact.Revision), nil
	}
	want, err := parseDigest(artifact.Digest)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("artifact %s: %w", artifact.Revision, err)
	}
	key := want.String()
	s.recordEvent(cache.CacheEventTypeMiss, owner)
	f, ok := s.flights[key]
	if !ok {
		f = s.start(ctx, key, want, artifact.URL, artifact.Revision)
	}
	f.waiters++
	s.mu.Unlock()

	select {
	case <-f.done:
	case <-ctx.Done():
		s.leave(key, f)
		return nil, fmt.Errorf("fetching artifact %s: %w", artifact.Revision, context.Cause(ctx))
	}
	if f.err != nil {
		return nil, f.err
	}
	s.mu.Lock()
	s.use(owner, key)
	s.mu.Unlock()
	return f.chart.withRevision(artifact.Revision), nil
}

// Current tells whether owner's last successful Get was of artifact's
// digest: a re-check of a release whose chart did not change. Its chart is
// then cached, unless the cache's bound evicted it since. Unlike a lookup
// it counts no cache request.
func (s *Source) Current(owner types.NamespacedName, artifact *meta.Artifact) bool {
	// An owner's digest parsed when it was recorded: the same string is the
	// same digest, and no other string (one that does not parse included)
	// is current.
	if artifact == nil || artifact.Digest == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owners[owner] == artifact.Digest
}

// start runs the download detached from the caller's cancellation, so that
// one reconciler giving up does not fail the others waiting for the same
// digest; it is cancelled only when every waiter has left. Callers hold s.mu.
func (s *Source) start(ctx context.Context, key string, want digest.Digest, url, revision string) *flight {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &flight{done: make(chan struct{}), cancel: cancel}
	s.flights[key] = f
	go func() {
		defer cancel()
		c, err := s.fetch(fctx, url, revision, want)

		s.mu.Lock()
		defer s.mu.Unlock()
		if s.flights[key] == f {
			delete(s.flights, key)
		}
		// Nobody waiting means nobody would own the entry.
		if err == nil && f.waiters > 0 {
			s.insert(key, c)
		}
		f.chart, f.err = c, err
		close(f.done)
	}()
	return f
}

func (s *Source) leave(key string, f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.waiters--
	if f.waiters > 0 {
		return
	}
	f.cancel()
	// A later Get must not join a cancelled download.
	if s.flights[key] == f {
		delete(s.flights, key)
	}
}

// fetch downloads, verifies and parses an archive once, so that an archive
// that is corrupt or not a valid chart never enters the cache.
func (s *Source) fetch(ctx context.Context, url, revision string, want digest.Digest) (*Chart, error) {
	body, err := s.download(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("fetching artifact %s: %w", revision, err)
	}
	s.downloads.Add(1)
	if got := want.Algorithm().FromBytes(body); got != want {
		return nil, fmt.Errorf("verifying artifact %s from %s: %w: expected %s, got %s",
			revision, url, ErrDigestMismatch, want, got)
	}
	c := &Chart{Digest: want.String(), Revision: revision, archive: body, loads: &s.loads}
	loaded, err := c.Load()
	if err != nil {
		return nil, err
	}
	c.Metadata = loaded.Metadata
	return c, nil
}

// Forget drops a deleted HelmRelease and evicts the entry nobody uses any
// more.
func (s *Source) Forget(owner types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetEvents(owner)
	if key, ok := s.owners[owner]; ok {
		delete(s.owners, owner)
		s.release(key)
	}
}

// Stats is a snapshot; the counters only grow.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	keys, _ := s.entries.ListKeys()
	s.mu.Unlock()
	entries := len(keys)
	return Stats{
		Downloads: s.downloads.Load(),
		Loads:     s.loads.Load(),
		Hits:      s.hits.Load(),
		Entries:   entries,
	}
}
