package chartserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"
)

// ociRepositoryPrefix is the registry path under which charts are pushed.
const ociRepositoryPrefix = "charts"

// ErrClosed is returned by AddChart once the server has been closed.
var ErrClosed = errors.New("chartserver: server closed")

// ErrChartExists is returned by AddChart when the name and version are
// already published. Republishing would make source-controller's caching
// behaviour depend on timing, so variants need a distinct version.
var ErrChartExists = errors.New("chartserver: chart version already published")

// ChartRef identifies a published chart.
type ChartRef struct {
	Name    string
	Version string
	// Digest is "sha256:<hex>" of the packaged .tgz. index.yaml lists the hex
	// part; the same bytes are the chart layer in the OCI registry.
	Digest string
	// URL is the absolute HTTP address of the packaged .tgz.
	URL string
	// OCIReference is oci://127.0.0.1:PORT/charts/<name>:<tag>. Helm turns a
	// "+" in the version into "_" in the tag.
	OCIReference string
	// OCIManifestDigest is the digest of the pushed OCI manifest.
	OCIManifestDigest string
}

// Server runs a Helm HTTP repository and an OCI registry on 127.0.0.1.
// All methods are safe for concurrent use.
type Server struct {
	workDir  string
	httpURL  string
	ociHost  string
	httpSrv  *http.Server
	ociSrv   *http.Server
	registry *registry.Client

	// addMu serialises AddChart so a chart is pushed and indexed as a unit.
	addMu sync.Mutex

	mu        sync.RWMutex
	closed    bool
	index     *repo.IndexFile
	indexYAML []byte
	archives  map[string][]byte

	closeOnce sync.Once
	closeErr  error
	stopped   chan struct{}
}

// Start runs both servers on free 127.0.0.1 ports. They stop when ctx is done
// or Close is called.
func Start(ctx context.Context) (*Server, error) {
	workDir, err := os.MkdirTemp("", "chartserver-*")
	if err != nil {
		return nil, fmt.Errorf("creating work directory: %w", err)
	}
	s := &Server{
		workDir:  workDir,
		index:    repo.NewIndexFile(),
		archives: map[string][]byte{},
		stopped:  make(chan struct{}),
	}
	if err := s.start(); err != nil {
		_ = s.Close()
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.stopped:
		}
	}()
	return s, nil
}

func (s *Server) start() error {
	if err := s.refreshIndex(); err != nil {
		return err
	}

	httpLn, err := listenLoopback()
	if err != nil {
		return fmt.Errorf("helm repository listener: %w", err)
	}
	s.httpURL = "http://" + httpLn.Addr().String()
	s.httpSrv = newHTTPServer(http.HandlerFunc(s.serveHelmRepository))
	go func() { _ = s.httpSrv.Serve(httpLn) }()

	ociLn, err := listenLoopback()
	if err != nil {
		return fmt.Errorf("oci registry listener: %w", err)
	}
	s.ociHost = ociLn.Addr().String()
	s.ociSrv = newHTTPServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	go func() { _ = s.ociSrv.Serve(ociLn) }()

	client, err := registry.NewClient(
		registry.ClientOptPlainHTTP(),
		registry.ClientOptWriter(io.Discard),
		// Keep Helm away from the user's registry credentials; the
		// registry never asks for any.
		registry.ClientOptCredentialsFile(filepath.Join(s.workDir, "registry-config.json")),
	)
	if err != nil {
		return fmt.Errorf("creating helm registry client: %w", err)
	}
	s.registry = client
	return nil
}

func listenLoopback() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening on 127.0.0.1: %w", err)
	}
	return ln, nil
}

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

// HelmRepositoryURL is the base URL of the Helm HTTP repository, without a
// trailing slash; index.yaml is directly below it.
func (s *Server) HelmRepositoryURL() string { return s.httpURL }

// OCIRepositoryURL is oci://127.0.0.1:PORT/charts. A chart is at
// <OCIRepositoryURL>/<name>, tagged with its version.
func (s *Server) OCIRepositoryURL() string {
	return "oci://" + s.ociHost + "/" + ociRepositoryPrefix
}

// AddChart packages the chart directory dir with opts applied, adds it to
// index.yaml and pushes it to the OCI registry.
func (s *Server) AddChart(dir string, opts ...Option) (ChartRef, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}

	s.addMu.Lock()
	defer s.addMu.Unlock()

	if s.isClosed() {
		return ChartRef{}, ErrClosed
	}
	pkg, err := packageChart(dir, s.workDir, o)
	if err != nil {
		return ChartRef{}, err
	}
	return s.pushAndPublish(pkg, o)
}

// pushAndPublish pushes pkg to the OCI registry and lists it in
// index.yaml. The caller holds addMu.
func (s *Server) pushAndPublish(pkg *packagedChart, o options) (ChartRef, error) {
	name, version := pkg.metadata.Name, pkg.metadata.Version
	if s.has(name, version) {
		return ChartRef{}, fmt.Errorf("%s %s: %w", name, version, ErrChartExists)
	}

	tag, pushOpts := version, []registry.PushOption(nil)
	if o.ociTag != "" {
		// Helm refuses a tag other than the version unless told not to
		// be strict.
		tag, pushOpts = o.ociTag, append(pushOpts, registry.PushOptStrictMode(false))
	}
	ociRef := s.ociHost + "/" + ociRepositoryPrefix + "/" + name + ":" + tag
	pushed, err := s.registry.Push(pkg.data, ociRef, pushOpts...)
	if err != nil {
		return ChartRef{}, fmt.Errorf("pushing %s to registry: %w", ociRef, err)
	}

	ref, err := s.publish(pkg)
	if err != nil {
		return ChartRef{}, err
	}
	ref.OCIReference = "oci://" + pushed.Ref
	ref.OCIManifestDigest = pushed.Manifest.Digest
	return ref, nil
}

// AddArchive publishes a chart packaged elsewhere (by `helm package`, say)
// byte for byte: it is listed in index.yaml under the name and version of
// its own Chart.yaml and pushed to the OCI registry under its version.
func (s *Server) AddArchive(data []byte) (ChartRef, error) {
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return ChartRef{}, fmt.Errorf("reading chart archive: %w", err)
	}
	sum := sha256.Sum256(data)
	pkg := &packagedChart{
		metadata:  ch.Metadata,
		fileName:  ch.Metadata.Name + "-" + ch.Metadata.Version + ".tgz",
		data:      data,
		digestHex: hex.EncodeToString(sum[:]),
	}

	s.addMu.Lock()
	defer s.addMu.Unlock()
	if s.isClosed() {
		return ChartRef{}, ErrClosed
	}
	return s.pushAndPublish(pkg, options{})
}

func (s *Server) isClosed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.closed
}

func (s *Server) has(name, version string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.index.Has(name, version)
}

// publish makes the archive downloadable and lists it in index.yaml.
func (s *Server) publish(pkg *packagedChart) (ChartRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if err := s.index.MustAdd(pkg.metadata, pkg.fileName, s.httpURL, pkg.digestHex); err != nil {
		return ChartRef{}, fmt.Errorf("adding %s to index: %w", pkg.fileName, err)
	}
	s.archives[pkg.fileName] = pkg.data
	if err := s.refreshIndex(); err != nil {
		return ChartRef{}, err
	}

	versions := s.index.Entries[pkg.metadata.Name]
	var url string
	for _, v := range versions {
		if v.Version == pkg.metadata.Version && len(v.URLs) > 0 {
			url = v.URLs[0]
		}
	}
	return ChartRef{
		Name:    pkg.metadata.Name,
		Version: pkg.metadata.Version,
		Digest:  "sha256:" + pkg.digestHex,
		URL:     url,
	}, nil
}

// refreshIndex re-renders index.yaml. The caller holds s.mu for writing (or
// has exclusive access during start).
func (s *Server) refreshIndex() error {
	s.index.SortEntries()
	s.index.Generated = time.Now()
	data, err := yaml.Marshal(s.index)
	if err != nil {
		return fmt.Errorf("encoding index.yaml: %w", err)
	}
	s.indexYAML = data
	return nil
}

func (s *Server) serveHelmRepository(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}

	name := strings.TrimPrefix(r.URL.Path, "/")
	data, modTime, contentType, ok := s.lookup(name)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType)
	http.ServeContent(w, r, name, modTime, bytes.NewReader(data))
}

// lookup returns a file of the Helm repository. Stored slices are never
// modified after publication, so they can be served after the lock is
// released.
func (s *Server) lookup(name string) (data []byte, modTime time.Time, contentType string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()

	if name == "index.yaml" {
		return s.indexYAML, s.index.Generated, "application/x-yaml", true
	}
	data, ok = s.archives[name]
	return data, time.Time{}, "application/gzip", ok
}

// Close stops both servers and removes the work directory. It is safe to
// call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stopped)

		var errs []error
		for _, srv := range []*http.Server{s.httpSrv, s.ociSrv} {
			if srv == nil {
				continue
			}
			if err := srv.Close(); err != nil {
				errs = append(errs, fmt.Errorf("stopping server: %w", err))
			}
		}
		if err := os.RemoveAll(s.workDir); err != nil {
			errs = append(errs, fmt.Errorf("removing work directory: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
