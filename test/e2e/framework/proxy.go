package framework

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Proxy stands between a controller and the test cluster's API server. It
// shows a test every request the controller makes, lets the test hold a
// request (to kill the controller at an exact point) and fails chosen
// requests with 500 Internal Server Error, as an API server under stress
// or a flaky network path does. The controller talks to it in plain HTTP;
// it forwards with the cluster's admin credentials.
type Proxy struct {
	srv *httptest.Server
	// Kubeconfig points a controller at the proxy.
	Kubeconfig string

	mu sync.Mutex
	// match picks the requests the fault applies to; skip of them pass
	// first, then the next fail of them fail.
	match      func(*http.Request) bool
	skip, fail int
	failed     []string
	// observers see each request before it is forwarded, in the order
	// added; one may block to hold the request.
	observers []func(*http.Request)
	// outage is the state of Outage (outage.go).
	outage outageState
}

// StartProxy starts a proxy to the test cluster, closed when t ends.
func (e *Env) StartProxy(t testing.TB) *Proxy {
	t.Helper()
	return StartProxyTo(t, e.Cluster.RESTConfig())
}

// Fail lets skip requests matching match through, then fails the next
// fail of them.
func (p *Proxy) Fail(match func(*http.Request) bool, skip, fail int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.skip, p.fail, p.failed = match, skip, fail, nil
}

// Failed lists the requests failed since the last Fail.
func (p *Proxy) Failed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failed...)
}

// Observe calls f with every request from now on, before it is forwarded.
// f runs on the request's goroutine: blocking holds the request. The
// returned function stops the observation.
func (p *Proxy) Observe(f func(*http.Request)) (stop func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	holder := &f
	p.observers = append(p.observers, func(r *http.Request) { (*holder)(r) })
	i := len(p.observers) - 1
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.observers[i] = nil
	}
}

func (p *Proxy) observe(r *http.Request) {
	p.mu.Lock()
	observers := slices.Clone(p.observers)
	p.mu.Unlock()
	for _, f := range observers {
		if f != nil {
			f(r)
		}
	}
}

func (p *Proxy) inject(r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.match == nil || p.fail == 0 || !p.match(r) {
		return false
	}
	if p.skip > 0 {
		p.skip--
		return false
	}
	p.fail--
	p.failed = append(p.failed, r.Method+" "+r.URL.RequestURI())
	return true
}

// HelmStorageRequest matches reads (GET: get, list) or writes (PUT, POST)
// of the Helm storage Secrets of release in ns, never watches.
func HelmStorageRequest(ns, release, method string) func(*http.Request) bool {
	secrets := "/api/v1/namespaces/" + ns + "/secrets"
	return func(r *http.Request) bool {
		if r.Method != method || !strings.HasPrefix(r.URL.Path, secrets) || r.URL.Query().Get("watch") == "true" {
			return false
		}
		return strings.Contains(r.URL.Path, "sh.helm.release.v1."+release+".") ||
			strings.Contains(r.URL.Query().Get("labelSelector"), "name="+release)
	}
}

// ObjectRequest matches a request of method for the object name of
// resource (a path such as "/apis/batch/v1/namespaces/ns/jobs"): by name
// (GET, DELETE, a server-side apply PATCH) or, for a client-side create,
// a POST to the collection. Never a watch.
func ObjectRequest(method, resource, name string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		if r.Method != method || r.URL.Query().Get("watch") == "true" {
			return false
		}
		return r.URL.Path == resource+"/"+name || method == http.MethodPost && r.URL.Path == resource
	}
}

// HoldAfter holds the first request matching hold that comes after a
// request matching after went through: a point between two steps of the
// controller (the delete and the create of a recreate). With after and
// hold the same, the second such request is held. Only that one request
// is held: held is closed when it is, release lets it go. A held request
// whose client went away (a killed controller) is dropped.
func (p *Proxy) HoldAfter(after, hold func(*http.Request) bool) (held <-chan struct{}, release func()) {
	var mu sync.Mutex
	seen, taken := false, false
	heldCh, releaseCh := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	stop := p.Observe(func(r *http.Request) {
		mu.Lock()
		holding := seen && !taken && hold(r)
		if holding {
			taken = true
			close(heldCh)
		} else if after(r) {
			seen = true
		}
		mu.Unlock()
		if !holding {
			return
		}
		select {
		case <-releaseCh:
		case <-r.Context().Done():
		}
	})
	return heldCh, func() {
		releaseOnce.Do(func() {
			stop()
			close(releaseCh)
		})
	}
}
