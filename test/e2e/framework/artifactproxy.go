package framework

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"
)

// ArtifactProxy stands between a controller and source-controller's
// artifact server, which the controller reaches through it when started
// with SOURCE_CONTROLLER_LOCALHOST=<Host()> (ArtifactProxyEnv). It breaks
// chosen downloads the way a restarting or overloaded source-controller or
// a flaky network path does: an error status, a body that stops halfway
// and hangs, a connection cut halfway. Everything else is forwarded.
type ArtifactProxy struct {
	srv    *httptest.Server
	target *url.URL
	// closed ends stalls held when the test ends.
	closed chan struct{}

	mu       sync.Mutex
	fault    ArtifactFault
	left     int
	active   int
	requests []ArtifactRequest
}

// ArtifactFaultKind is how a download is broken.
type ArtifactFaultKind string

// The faults of an ArtifactProxy.
const (
	// ArtifactStatus answers with an error status and no artifact.
	ArtifactStatus ArtifactFaultKind = "status"
	// ArtifactStall sends the headers (with the full Content-Length) and
	// part of the body, then sends nothing more until the client gives up
	// or Hold passes.
	ArtifactStall ArtifactFaultKind = "stall"
	// ArtifactCut sends the headers and part of the body, then closes the
	// connection.
	ArtifactCut ArtifactFaultKind = "cut"
)

// ArtifactFault says how to break the next downloads.
type ArtifactFault struct {
	Kind ArtifactFaultKind
	// Status is the status of ArtifactStatus; 503 when zero.
	Status int
	// Fraction is the share of the body ArtifactStall and ArtifactCut
	// send first; half when zero.
	Fraction float64
	// Hold bounds how long ArtifactStall hangs while the client waits;
	// ten minutes when zero.
	Hold time.Duration
	// Match picks the requests the fault applies to; every request when
	// nil. Requests that do not match are forwarded and do not count.
	Match func(*http.Request) bool
}

// ArtifactRequest is one request the proxy served.
type ArtifactRequest struct {
	Path  string
	Start time.Time
	// Fault is the fault applied; empty when the request was forwarded.
	Fault ArtifactFaultKind
	// Status is the status sent.
	Status int
	// Size is the artifact's size, Sent the bytes of it the client got.
	Size, Sent int64
	// Took is how long the request lasted: for a stall, until the client
	// gave up (ClientLeft) or Hold passed.
	Took       time.Duration
	ClientLeft bool
	// Err is what went wrong fetching the artifact from the real server.
	Err string
}

// StartArtifactProxy starts a proxy to the test cluster's artifact
// server, closed when t ends.
func (e *Env) StartArtifactProxy(t testing.TB) *ArtifactProxy {
	t.Helper()
	target, err := url.Parse(e.Cluster.SourceControllerStorageURL())
	if err != nil {
		t.Fatal(err)
	}
	p := &ArtifactProxy{target: target, closed: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		close(p.closed)
		p.srv.Close()
	})
	return p
}

// Host is the proxy's host:port, the value of SOURCE_CONTROLLER_LOCALHOST.
func (p *ArtifactProxy) Host() string { return p.srv.Listener.Addr().String() }

// Env is the environment that makes a controller download through p.
func (p *ArtifactProxy) Env() []string { return []string{"SOURCE_CONTROLLER_LOCALHOST=" + p.Host()} }

// Inject breaks the next n requests that f matches.
func (p *ArtifactProxy) Inject(f ArtifactFault, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	if f.Fraction <= 0 || f.Fraction >= 1 {
		f.Fraction = 0.5
	}
	if f.Hold == 0 {
		f.Hold = 10 * time.Minute
	}
	p.fault, p.left = f, n
}

// Left is how many requests the fault still breaks.
func (p *ArtifactProxy) Left() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.left
}

// Over reports whether the fault is over: every request it was to break
// has been broken, and has ended (a stall lasts until the client gives up).
func (p *ArtifactProxy) Over() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.left == 0 && p.active == 0
}

// Requests lists the requests served so far, oldest first; a request in
// flight is listed once it ends.
func (p *ArtifactProxy) Requests() []ArtifactRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ArtifactRequest(nil), p.requests...)
}

// take returns the fault to apply to r, if any.
func (p *ArtifactProxy) take(r *http.Request) (ArtifactFault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == 0 || (p.fault.Match != nil && !p.fault.Match(r)) {
		return ArtifactFault{}, false
	}
	p.left--
	p.active++
	return p.fault, true
}

func (p *ArtifactProxy) record(req ArtifactRequest, faulted bool) {
	req.Took = time.Since(req.Start)
	p.mu.Lock()
	defer p.mu.Unlock()
	if faulted {
		p.active--
	}
	p.requests = append(p.requests, req)
}

func (p *ArtifactProxy) serve(w http.ResponseWriter, r *http.Request) {
	req := ArtifactRequest{Path: r.URL.Path, Start: time.Now()}
	f, faulted := p.take(r)
	if !faulted {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		fwd := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(p.target) }}
		fwd.ServeHTTP(rec, r)
		req.Status, req.Sent = rec.status, rec.sent
		p.record(req, false)
		return
	}
	defer func() { p.record(req, true) }()
	req.Fault = f.Kind
	if f.Kind == ArtifactStatus {
		req.Status = f.Status
		http.Error(w, fmt.Sprintf("%d injected by the artifact fault proxy", f.Status), f.Status)
		return
	}

	body, status, err := p.fetch(r)
	if err != nil || status != http.StatusOK {
		// Nothing to break halfway: pass the failure on.
		req.Err = fmt.Sprintf("status %d, %v", status, err)
		req.Status = http.StatusBadGateway
		http.Error(w, req.Err, http.StatusBadGateway)
		return
	}
	req.Size, req.Status = int64(len(body)), http.StatusOK
	part := body[:int(float64(len(body))*f.Fraction)]
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	n, _ := w.Write(part)
	req.Sent = int64(n)
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	switch f.Kind {
	case ArtifactStall:
		select {
		case <-r.Context().Done():
			req.ClientLeft = true
		case <-time.After(f.Hold):
		case <-p.closed:
		}
		// Returning short of Content-Length closes the connection.
	case ArtifactCut:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
}

// fetch reads the artifact from the real server.
func (p *ArtifactProxy) fetch(r *http.Request) ([]byte, int, error) {
	u := *p.target
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// statusRecorder notes the status and body size of a forwarded response.
type statusRecorder struct {
	http.ResponseWriter
	status int
	sent   int64
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	n, err := s.ResponseWriter.Write(b)
	s.sent += int64(n)
	return n, err
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
