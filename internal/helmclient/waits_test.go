package helmclient

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/kustomize"
	helmkube "helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/healthcheck"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// The tests in this file run against a real kube-apiserver and etcd
// (envtest) from the project's tool cache; a missing binary fails them.

var sharedAPIServer envtestserver.Shared

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }

// requestLog records the path and query of every request to the cluster.
type requestLog struct {
	mu       sync.Mutex
	requests []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.requests = append(l.requests, r.URL.Path+"?"+r.URL.RawQuery)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// unnarrowed returns the requests that listed or watched every object of
// path's collection.
func (l *requestLog) unnarrowed(path string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.requests {
		p, query, _ := strings.Cut(r, "?")
		if p == path && !strings.Contains(query, "fieldSelector=") && !strings.Contains(query, "labelSelector=") {
			out = append(out, r)
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitCluster is a namespace with a crowd of neighbours, and Helm's client
// and ours for it, each with its own request log.
type waitCluster struct {
	ns        string
	cs        kubernetes.Interface
	getter    *connect.Getter
	helm      *helmkube.Client
	helmLog   *requestLog
	narrowed  *Client
	narrowLog *requestLog
}

func newWaitCluster(t *testing.T, ns string) *waitCluster {
	t.Helper()
	cfg := sharedAPIServer.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("neighbour-%d", i)}, Data: map[string]string{"k": "v"}}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := &waitCluster{ns: ns, cs: cs, helmLog: &requestLog{}, narrowLog: &requestLog{}}
	logged := func(l *requestLog) *connect.Getter {
		lc := rest.CopyConfig(cfg)
		lc.Wrap(l.wrap)
		return connect.NewGetter(lc, ns, false)
	}
	c.getter = connect.NewGetter(cfg, ns, false)
	c.helm = helmkube.New(logged(c.helmLog))
	c.helm.Namespace = ns
	c.narrowed = NewClient(logged(c.narrowLog), NewFieldValidation())
	c.narrowed.Namespace = ns
	return c
}

func (c *waitCluster) build(t *testing.T, manifest string) helmkube.ResourceList {
	t.Helper()
	list, err := c.narrowed.Build(bytes.NewBufferString(manifest), false)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func (c *waitCluster) create(t *testing.T, list helmkube.ResourceList) {
	t.Helper()
	if _, err := c.narrowed.Create(list); err != nil {
		t.Fatal(err)
	}
}

// setDeploymentReady writes the status a Deployment controller would write
// for ready or not (envtest runs none).
func (c *waitCluster) setDeploymentReady(t *testing.T, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	d, err := c.cs.AppsV1().Deployments(c.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1}
	if ready {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
		d.Status.Conditions = []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}
	}
	if _, err := c.cs.AppsV1().Deployments(c.ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deploymentManifest(name string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: 1
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: app
        image: example.invalid/app:1
`, name)
}

func configMapManifest(name, ready string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
data:
  ready: %q
`, name, ready)
}

func manifests(docs ...string) string { return strings.Join(docs, "---\n") }

// TestNarrowedWaitsDecideAsHelms runs the same waits with Helm's own client
// and with ours, on the same objects, and wants the same outcome; ours must
// never list or watch the namespace's whole ConfigMap collection, where
// Helm's does.
func TestNarrowedWaitsDecideAsHelms(t *testing.T) {
	c := newWaitCluster(t, "narrowed-waits")
	all := c.build(t, manifests(
		configMapManifest("own-a", "yes"),
		configMapManifest("own-b", "no"),
		deploymentManifest("web"),
		deploymentManifest("stuck"),
	))
	c.create(t, all)
	c.setDeploymentReady(t, "web", true)
	c.setDeploymentReady(t, "stuck", false)
	pick := func(names ...string) helmkube.ResourceList {
		return all.Filter(func(info *resource.Info) bool {
			for _, n := range names {
				if info.Name == n {
					return true
				}
			}
			return false
		})
	}
	mapper, err := c.getter.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	readers, err := healthcheck.Compile([]kustomize.CustomHealthCheck{{
		APIVersion:             "v1",
		Kind:                   "ConfigMap",
		HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "data.ready == 'yes'"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	exprs := helmkube.WithKStatusReaders(readers(mapper)...)

	tests := []struct {
		name     string
		strategy helmkube.WaitStrategy
		opts     []helmkube.WaitOption
		wait     func(w helmkube.Waiter) error
		// wantErr is a substring of Helm's error; empty means ready.
		wantErr string
		// wantOurs is the start of our error when it differs from Helm's:
		// one line in upstream's words (kubewait.WaitError).
		wantOurs string
	}{
		{
			name:     "ready objects, two of one kind",
			strategy: helmkube.StatusWatcherStrategy,
			wait:     func(w helmkube.Waiter) error { return w.Wait(pick("own-a", "own-b", "web"), 20*time.Second) },
		},
		{
			name:     "a Deployment that is not ready",
			strategy: helmkube.StatusWatcherStrategy,
			wait:     func(w helmkube.Waiter) error { return w.WaitWithJobs(pick("own-a", "stuck"), 2*time.Second) },
			wantErr:  "resource Deployment/narrowed-waits/stuck not ready. status: InProgress",
			wantOurs: "timeout waiting for: [Deployment/narrowed-waits/stuck status: 'InProgress'] (Deployment/narrowed-waits/stuck: ",
		},
		{
			name:     "healthCheckExprs: a ConfigMap the expression holds back",
			strategy: helmkube.StatusWatcherStrategy,
			opts:     []helmkube.WaitOption{exprs},
			wait:     func(w helmkube.Waiter) error { return w.Wait(pick("own-a", "own-b"), 2*time.Second) },
			wantErr:  "resource ConfigMap/narrowed-waits/own-b not ready. status: InProgress",
			wantOurs: "timeout waiting for: [ConfigMap/narrowed-waits/own-b status: 'InProgress']",
		},
		{
			name:     "healthCheckExprs: a ConfigMap the expression passes",
			strategy: helmkube.StatusWatcherStrategy,
			opts:     []helmkube.WaitOption{exprs},
			wait:     func(w helmkube.Waiter) error { return w.Wait(pick("own-a", "web"), 20*time.Second) },
		},
		{
			name:     "hookOnly ignores readiness",
			strategy: helmkube.HookOnlyStrategy,
			wait:     func(w helmkube.Waiter) error { return w.Wait(pick("stuck"), 2*time.Second) },
		},
		{
			name:     "hookOnly watches hooks until ready",
			strategy: helmkube.HookOnlyStrategy,
			wait:     func(w helmkube.Waiter) error { return w.WatchUntilReady(pick("own-b"), 20*time.Second) },
		},
		{
			name:     "deletion of objects that still exist",
			strategy: helmkube.StatusWatcherStrategy,
			wait:     func(w helmkube.Waiter) error { return w.WaitForDelete(pick("own-a", "web"), 2*time.Second) },
			wantErr:  "resource ConfigMap/narrowed-waits/own-a still exists",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, side := range []struct {
				name   string
				client helmkube.InterfaceWaitOptions
			}{{"helm", c.helm}, {"ours", c.narrowed}} {
				w, err := side.client.GetWaiterWithOptions(tc.strategy, tc.opts...)
				if err != nil {
					t.Fatalf("%s: %v", side.name, err)
				}
				err = tc.wait(w)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("%s: %v, want ready", side.name, err)
				case side.name == "ours" && tc.wantOurs != "":
					if err == nil || !strings.HasPrefix(err.Error(), tc.wantOurs) || strings.Contains(err.Error(), "\n") {
						t.Errorf("%s: %q, want one line starting with %q", side.name, err, tc.wantOurs)
					}
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("%s: %v, want an error with %q", side.name, err, tc.wantErr)
				}
			}
		})
	}

	collection := "/api/v1/namespaces/narrowed-waits/configmaps"
	if got := c.narrowLog.unnarrowed(collection); len(got) != 0 {
		t.Errorf("our waits read every ConfigMap of the namespace: %v", got)
	}
	if got := c.helmLog.unnarrowed(collection); len(got) == 0 {
		t.Error("Helm's waits never read the whole collection: the request log sees nothing")
	}
}

// TestNarrowedWaitFollowsChanges waits for two Deployments that become
// ready one after the other while the wait runs, so the result depends on
// the watches of both objects being merged.
func TestNarrowedWaitFollowsChanges(t *testing.T) {
	c := newWaitCluster(t, "narrowed-changes")
	list := c.build(t, manifests(deploymentManifest("first"), deploymentManifest("second")))
	c.create(t, list)
	c.setDeploymentReady(t, "first", false)
	c.setDeploymentReady(t, "second", false)

	w, err := c.narrowed.GetWaiterWithOptions(helmkube.StatusWatcherStrategy)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- w.Wait(list, 30*time.Second) }()

	time.Sleep(time.Second)
	c.setDeploymentReady(t, "second", true)
	select {
	case err := <-done:
		t.Fatalf("wait ended with one Deployment still in progress: %v", err)
	case <-time.After(time.Second):
	}
	c.setDeploymentReady(t, "first", true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("wait did not see both Deployments become ready")
	}
	if time.Since(start) < 2*time.Second {
		t.Error("wait ended before the second change")
	}
}

// TestFailedWaitsSayUpstreamsWords: a readiness wait that fails says so on
// one line that starts as upstream helm-controller's does, whichever wait
// Helm runs (the release's, or a hook's or test's).
func TestFailedWaitsSayUpstreamsWords(t *testing.T) {
	c := newWaitCluster(t, "failed-wait-words")
	list := c.build(t, manifests(deploymentManifest("web"), deploymentManifest("stuck"), jobManifest("broken", false)))
	c.create(t, list)
	c.setDeploymentReady(t, "web", true)
	c.setDeploymentReady(t, "stuck", false)
	c.setJob(t, "broken", jobFailed)
	pick := func(names ...string) helmkube.ResourceList {
		return list.Filter(func(info *resource.Info) bool { return slices.Contains(names, info.Name) })
	}
	const ns = "failed-wait-words"
	tests := []struct {
		name     string
		strategy helmkube.WaitStrategy
		wait     func(w helmkube.Waiter) error
		// want is the start of the message, up to the end of upstream's
		// list; after, the message names what each object reports.
		want string
	}{
		{
			name:     "timed out",
			strategy: helmkube.StatusWatcherStrategy,
			wait:     func(w helmkube.Waiter) error { return w.Wait(pick("web", "stuck"), 2*time.Second) },
			want:     "timeout waiting for: [Deployment/" + ns + "/stuck status: 'InProgress'] (Deployment/" + ns + "/stuck: ",
		},
		{
			name:     "timed out, several objects",
			strategy: helmkube.StatusWatcherStrategy,
			wait:     func(w helmkube.Waiter) error { return w.WaitWithJobs(pick("stuck", "broken"), 2*time.Second) },
			want:     "timeout waiting for: [Deployment/" + ns + "/stuck status: 'InProgress', Job/" + ns + "/broken status: 'Failed'] (",
		},
		{
			name:     "a failed Job ends the wait early",
			strategy: helmkube.StatusWatcherStrategy,
			wait:     func(w helmkube.Waiter) error { return w.WaitWithJobs(pick("web", "broken"), 20*time.Second) },
			want:     "failed early due to stalled resources: [Job/" + ns + "/broken status: 'Failed'] (Job/" + ns + "/broken: ",
		},
		{
			name:     "a failed hook or test",
			strategy: helmkube.HookOnlyStrategy,
			wait:     func(w helmkube.Waiter) error { return w.WatchUntilReady(pick("broken"), 20*time.Second) },
			want:     "failed early due to stalled resources: [Job/" + ns + "/broken status: 'Failed'] (Job/" + ns + "/broken: ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := c.narrowed.GetWaiterWithOptions(tc.strategy)
			if err != nil {
				t.Fatal(err)
			}
			err = tc.wait(w)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("got %q\nwant one line starting with %q", err, tc.want)
			}
		})
	}
}
