package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
)

// faultProxy stands between a controller and the test cluster's API server
// and fails chosen requests with 500 Internal Server Error, as an API
// server under stress or a flaky network path does. The controller talks
// to it in plain HTTP; it forwards with the cluster's admin credentials.
type faultProxy struct {
	srv        *httptest.Server
	kubeconfig string

	mu sync.Mutex
	// match picks the requests the fault applies to; skip of them pass
	// first, then the next fail of them fail.
	match      func(*http.Request) bool
	skip, fail int
	// failed lists the requests failed so far.
	failed []string
}

func startFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	cfg := env.Cluster.RESTConfig()
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{}
	forward := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:     transport,
		FlushInterval: -1, // watches stream
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.inject(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the e2e fault proxy","reason":"InternalError","code":500}`)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)

	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
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
`, p.srv.URL)
	if err := os.WriteFile(p.kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// arm makes the proxy let skip matching requests through, then fail the
// next fail of them.
func (p *faultProxy) arm(match func(*http.Request) bool, skip, fail int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.skip, p.fail, p.failed = match, skip, fail, nil
}

func (p *faultProxy) inject(r *http.Request) bool {
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

func (p *faultProxy) failedRequests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failed...)
}

// helmStorageRequest matches reads (method GET: get, list) or writes (PUT)
// of the Helm storage Secrets of release in ns.
func helmStorageRequest(ns, release, method string) func(*http.Request) bool {
	secrets := "/api/v1/namespaces/" + ns + "/secrets"
	return func(r *http.Request) bool {
		if r.Method != method || !strings.HasPrefix(r.URL.Path, secrets) || r.URL.Query().Get("watch") == "true" {
			return false
		}
		return strings.Contains(r.URL.Path, "sh.helm.release.v1."+release+".") ||
			strings.Contains(r.URL.Query().Get("labelSelector"), "name="+release)
	}
}

// TestResumeSurvivesTransientAPIErrors: a revision is held for its
// afterHooks readiness wait when the controller is killed. The next
// controller meets API errors on Helm storage while it resumes: reading
// the pending revision back, or recording it deployed. Neither is a failed
// install: nothing is uninstalled or rolled back, no failure is counted,
// and the wait resumes until the revision is deployed. Install remediation
// has retries, so a failure counted by mistake would uninstall.
func TestResumeSurvivesTransientAPIErrors(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := createHelmRepository(t, ns)
	ref := remPublish(t, crashChart, "0.1.0", ns)
	proxy := startFaultProxy(t)
	ctl := newShardController(t, ns, "apiproxy-"+rand.String(8), "")
	ctl.kubeconfig = proxy.kubeconfig

	for _, tc := range []struct {
		name string
		// method and skip choose the storage requests that fail: skip
		// of them pass after the restart (the reconcile's own read of the
		// last release is the first), then fail of them fail.
		method     string
		skip, fail int
	}{
		{name: "reading-the-pending-revision", method: http.MethodGet, skip: 1, fail: 2},
		{name: "recording-it-deployed", method: http.MethodPut, fail: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl.ensureRunning(t)
			name := "flaky-" + tc.name[:4]
			hr := crashRelease(ctl, ns, name, repo.Name, ref, `{"podAnnotations":{"sim.afterhooks.io/delay":"8s"}}`)
			hr.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
			remCreate(t, hr)
			env.Eventually(t, time.Minute, name+".v1 held for its readiness wait", func(ctx context.Context) error {
				ctl.mustRun(t)
				return crashWantHeld(remStorage(t, ns, name), true)
			})
			ctl.kill(t)

			proxy.arm(helmStorageRequest(ns, name, tc.method), tc.skip, tc.fail)
			ctl.start(t)
			remWaitReady(t, hr, helmv2.InstallSucceededReason, 1)
			if failed := proxy.failedRequests(); len(failed) != tc.fail {
				t.Fatalf("the proxy failed %d requests (%v), want %d: the fault was not exercised", len(failed), failed, tc.fail)
			} else {
				t.Logf("injected: %v", failed)
			}
			ahWantStorage(t, ns, name, "deployed")
			if st := hr.Status; st.InstallFailures != 0 || st.Failures != 0 {
				t.Errorf("installFailures %d, failures %d: a transient API error was counted", st.InstallFailures, st.Failures)
			}
			events, err := remEvents(context.Background(), ns, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events {
				switch e.Reason {
				case helmv2.UninstallSucceededReason, helmv2.UninstallFailedReason, helmv2.RollbackSucceededReason,
					helmv2.RollbackFailedReason, helmv2.InstallFailedReason:
					t.Errorf("event %s: %s", e.Reason, e.Message)
				}
			}
			remWantEvent(t, ns, name, "Normal", ahWaitingReason, fmt.Sprintf("Resuming the readiness wait of %s.v1", name))
			if hr.Status.History.Latest().Version != 1 {
				t.Errorf("history %+v, want v1 only", hr.Status.History)
			}
		})
	}
}
