package framework

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// outageState is what Outage keeps in a Proxy, guarded by Proxy.mu.
type outageState struct {
	until time.Time
	// refused lists the requests refused while down; resets counts the
	// connections reset as they were accepted.
	refused []RefusedRequest
	resets  int
	// active are the requests in flight (proxies from StartProxyTo), cut
	// those cut by the start of an outage.
	active map[*http.Request]Call
	cut    []Call
}

// RefusedRequest is a request a Proxy refused during an outage.
type RefusedRequest struct {
	At   time.Time
	Call Call
}

// Outage makes the cluster behind the proxy unreachable for d, from now:
// every connection open is cut (requests in flight and watches end
// mid-stream, as when a load balancer or a network path goes away), and
// until d has passed every new connection is reset as soon as it is
// accepted (proxies from StartProxyTo) or every new request is answered
// by closing its connection without a response. Outage returns at once;
// Down tells whether the outage still lasts.
func (p *Proxy) Outage(d time.Duration) {
	p.mu.Lock()
	p.outage.until = time.Now().Add(d)
	for _, c := range p.outage.active {
		p.outage.cut = append(p.outage.cut, c)
	}
	p.mu.Unlock()
	p.srv.CloseClientConnections()
}

// Cut lists the requests in flight that outages cut (watches among them),
// on proxies from StartProxyTo.
func (p *Proxy) Cut() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.outage.cut...)
}

// track records r as in flight until the returned function is called.
func (p *Proxy) track(r *http.Request) (done func()) {
	c := ParseCall(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.outage.active == nil {
		p.outage.active = map[*http.Request]Call{}
	}
	p.outage.active[r] = c
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.outage.active, r)
	}
}

// Down reports whether an outage lasts.
func (p *Proxy) Down() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Now().Before(p.outage.until)
}

// Refused lists the requests refused during outages, and counts the
// connections reset on accept.
func (p *Proxy) Refused() (requests []RefusedRequest, resets int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]RefusedRequest(nil), p.outage.refused...), p.outage.resets
}

// refuse closes r's connection without an answer when an outage lasts.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request) bool {
	p.mu.Lock()
	down := time.Now().Before(p.outage.until)
	if down {
		p.outage.refused = append(p.outage.refused, RefusedRequest{At: time.Now(), Call: ParseCall(r)})
	}
	p.mu.Unlock()
	if !down {
		return false
	}
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return true
		}
	}
	panic(http.ErrAbortHandler)
}

// outageListener resets connections accepted during an outage.
type outageListener struct {
	net.Listener
	p *Proxy
}

func (l *outageListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.p.Down() {
			return c, err
		}
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // a reset, not an orderly close
		}
		_ = c.Close()
		l.p.mu.Lock()
		l.p.outage.resets++
		l.p.mu.Unlock()
	}
}

// StartProxyTo is StartProxy to any cluster, such as a second one a
// HelmRelease reaches through spec.kubeConfig: Kubeconfig points at the
// proxy, which forwards with cfg's credentials. Observe, Fail and Outage
// work as on StartProxy's proxy. It is closed when t ends.
func StartProxyTo(t testing.TB, cfg *rest.Config) *Proxy {
	t.Helper()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	quiet := log.New(io.Discard, "", 0)
	p := &Proxy{}
	forward := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
		// A cut connection is the point of an outage, not news.
		ErrorLog: quiet,
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.refuse(w, r) {
			return
		}
		defer p.track(r)()
		p.observe(r)
		if r.Context().Err() != nil {
			return
		}
		if p.inject(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the e2e fault proxy","reason":"InternalError","code":500}`)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	p.srv.Config.ErrorLog = quiet
	p.srv.Listener = &outageListener{Listener: p.srv.Listener, p: p}
	p.srv.Start()
	t.Cleanup(p.srv.Close)

	p.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p.Kubeconfig, []byte(proxyKubeconfig(p.srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// proxyKubeconfig is a kubeconfig for a proxy at url, which needs no
// credentials.
func proxyKubeconfig(url string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster: {server: %q}
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: proxy}
current-context: proxy
`, url)
}
