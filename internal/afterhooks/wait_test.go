package afterhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/pkg/runtime/patch"
	"helm.sh/helm/v4/pkg/kube"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// stubKube is a kube client whose Build returns fixed resources and whose
// waiter returns a fixed error (or blocks until released).
type stubKube struct {
	kubefake.PrintingKubeClient
	resources kube.ResourceList
	waitErr   error
	block     chan struct{}

	mu         sync.Mutex
	strategy   kube.WaitStrategy
	optCount   int
	withJobs   bool
	waitCalled bool
}

func (s *stubKube) Build(io.Reader, bool) (kube.ResourceList, error) { return s.resources, nil }

func (s *stubKube) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return s.GetWaiterWithOptions(ws)
}

func (s *stubKube) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strategy, s.optCount = ws, len(opts)
	return &stubWaiter{s: s}, nil
}

type stubWaiter struct {
	kubefake.PrintingKubeWaiter
	s *stubKube
}

func (w *stubWaiter) wait(jobs bool) error {
	w.s.mu.Lock()
	w.s.waitCalled, w.s.withJobs = true, jobs
	w.s.mu.Unlock()
	if w.s.block != nil {
		<-w.s.block
	}
	return w.s.waitErr
}

func (w *stubWaiter) Wait(kube.ResourceList, time.Duration) error         { return w.wait(false) }
func (w *stubWaiter) WaitWithJobs(kube.ResourceList, time.Duration) error { return w.wait(true) }

func info(gvk schema.GroupVersionKind, resourceName, namespace, name string, obj runtime.Object) *resource.Info {
	return &resource.Info{
		Name:      name,
		Namespace: namespace,
		Object:    obj,
		Mapping: &meta.RESTMapping{
			GroupVersionKind: gvk,
			Resource:         gvk.GroupVersion().WithResource(resourceName),
			Scope:            meta.RESTScopeNamespace,
		},
	}
}

var (
	deployGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")
	cmGVK     = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	svcGVK    = corev1.SchemeGroupVersion.WithKind("Service")
)

func deployment(name string, ready bool) *appsv1.Deployment {
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: relNS, Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr(int32(1))},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1},
	}
	if ready {
		d.Status.ReadyReplicas, d.Status.AvailableReplicas = 1, 1
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
	}
	return d
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: relNS},
	}
}

func loadBalancer(name string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: relNS},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.1"},
	}
}

func ptr[T any](v T) *T { return &v }

// liveObjects serves fetch from a map of objects by name; missing names are
// NotFound.
func liveObjects(objs ...runtime.Object) func(context.Context, *resource.Info) (*unstructured.Unstructured, error) {
	byName := map[string]runtime.Object{}
	for _, o := range objs {
		byName[o.(metav1.Object).GetName()] = o
	}
	return func(_ context.Context, i *resource.Info) (*unstructured.Unstructured, error) {
		o, ok := byName[i.Name]
		if !ok {
			return nil, apierrors.NewNotFound(i.Mapping.Resource.GroupResource(), i.Name)
		}
		return patch.ToUnstructured(o)
	}
}

func withFetch(f func(context.Context, *resource.Info) (*unstructured.Unstructured, error)) WaitOption {
	return func(o *waitOptions) { o.fetch = f }
}

// helmNotReady is the error Helm's status watcher returns for a resource.
func helmNotReady(kind, ns, name, st, msg string) error {
	return fmt.Errorf("resource %s/%s/%s not ready. status: %s, message: %s", kind, ns, name, st, msg)
}

func TestWaitReady(t *testing.T) {
	rel := &releasev1.Release{Name: relName, Namespace: relNS, Version: 2, Manifest: "---"}
	web := info(deployGVK, "deployments", relNS, "web", deployment("web", false))
	cm := info(cmGVK, "configmaps", relNS, "cfg", configMap("cfg"))
	lb := info(svcGVK, "services", relNS, "lb", loadBalancer("lb"))
	gone := info(cmGVK, "configmaps", relNS, "gone", configMap("gone"))

	tests := []struct {
		name      string
		kc        *stubKube
		strategy  kube.WaitStrategy
		jobs      bool
		opts      []WaitOption
		wantErr   string // substring; empty means success
		wantNames []string
		wantOpts  int
	}{
		{
			name:     "ready, status watcher, with jobs",
			kc:       &stubKube{resources: kube.ResourceList{web, cm}},
			strategy: kube.StatusWatcherStrategy,
			jobs:     true,
			wantOpts: 1,
		},
		{
			name:     "ready, legacy, with status readers option",
			kc:       &stubKube{resources: kube.ResourceList{web}},
			strategy: kube.LegacyStrategy,
			opts:     []WaitOption{WithStatusReaders(engine.StatusReader(nil))},
			wantOpts: 2,
		},
		{
			name:     "nothing to wait for",
			kc:       &stubKube{},
			strategy: kube.StatusWatcherStrategy,
		},
		{
			// A self-deleting Job that nothing saw finish reaches the wait
			// as Failed; the waiter's error says why, and so must ours.
			name: "a gone Job of unknown outcome keeps its explanation",
			kc: &stubKube{resources: kube.ResourceList{web}, waitErr: kubewait.AddNote(
				kubewait.FromHelm(helmNotReady("Job", relNS, "migrate", "Failed", "Job Failed. failed: 0/1")),
				"Job apps/migrate: whether it succeeded is unknown")},
			strategy:  kube.StatusWatcherStrategy,
			opts:      []WaitOption{withFetch(liveObjects())},
			wantErr:   "[Job/apps/migrate status: 'Failed'] (Job apps/migrate: whether it succeeded is unknown; Job/apps/migrate: Job Failed. failed: 0/1)",
			wantNames: []string{"migrate"},
			wantOpts:  1,
		},
		{
			name: "status watcher names what Helm named",
			kc: &stubKube{resources: kube.ResourceList{web, cm}, waitErr: errors.Join(
				helmNotReady("Job", relNS, "migrate", "Failed", "Job Failed. failed: 1/1"),
				helmNotReady("Deployment", relNS, "web", "InProgress", "Deployment does not have minimum availability."),
				context.DeadlineExceeded,
			)},
			strategy: kube.StatusWatcherStrategy,
			// The live objects are not consulted.
			opts: []WaitOption{withFetch(liveObjects())},
			wantErr: "timeout waiting for: [Deployment/apps/web status: 'InProgress', Job/apps/migrate status: 'Failed'] " +
				"(Deployment/apps/web: Deployment does not have minimum availability.; Job/apps/migrate: Job Failed. failed: 1/1)",
			wantNames: []string{"web", "migrate"},
			wantOpts:  1,
		},
		{
			name:      "status watcher error without resources: diagnose with kstatus",
			kc:        &stubKube{resources: kube.ResourceList{web, cm, gone}, waitErr: context.DeadlineExceeded},
			strategy:  kube.StatusWatcherStrategy,
			opts:      []WaitOption{withFetch(liveObjects(deployment("web", false), configMap("cfg")))},
			wantErr:   "timeout waiting for: [ConfigMap/apps/gone status: 'NotFound', Deployment/apps/web status: 'InProgress'] (ConfigMap/apps/gone: resource not found; Deployment/apps/web: Available: 0/1)",
			wantNames: []string{"gone", "web"},
			wantOpts:  1,
		},
		{
			name:      "legacy without clientset: kstatus decides",
			kc:        &stubKube{resources: kube.ResourceList{web, cm, lb}, waitErr: context.DeadlineExceeded},
			strategy:  kube.LegacyStrategy,
			opts:      []WaitOption{withFetch(liveObjects(deployment("web", false), configMap("cfg"), loadBalancer("lb")))},
			wantErr:   "timeout waiting for: [Deployment/apps/web status: 'InProgress']",
			wantNames: []string{"web"},
			wantOpts:  1,
		},
		{
			name:     "legacy with clientset: Helm's ready checks decide",
			kc:       &stubKube{resources: kube.ResourceList{web, cm, lb}, waitErr: context.DeadlineExceeded},
			strategy: kube.LegacyStrategy,
			opts: []WaitOption{
				withFetch(liveObjects(deployment("web", false), configMap("cfg"), loadBalancer("lb"))),
				withClientSet(k8sfake.NewClientset(deployment("web", false), configMap("cfg"), loadBalancer("lb"))),
			},
			// kstatus calls the Service Current; Helm's legacy check
			// waits for the load balancer.
			wantErr: "Service/apps/lb status: 'Current'] " +
				"(Deployment/apps/web: Available: 0/1; Service/apps/lb: Service is ready (not ready by Helm's legacy readiness checks))",
			wantNames: []string{"web", "lb"},
			wantOpts:  1,
		},
		{
			name: "status watcher stopped early by a failed object",
			kc: &stubKube{resources: kube.ResourceList{web, cm}, waitErr: errors.Join(
				helmNotReady("Job", relNS, "migrate", "Failed", "Job Failed.\nfailed: 1/1"),
			)},
			strategy:  kube.StatusWatcherStrategy,
			opts:      []WaitOption{withFetch(liveObjects())},
			wantErr:   "failed early due to stalled resources: [Job/apps/migrate status: 'Failed'] (Job/apps/migrate: Job Failed. failed: 1/1)",
			wantNames: []string{"migrate"},
			wantOpts:  1,
		},
		{
			name:      "legacy gave up early: stalled",
			kc:        &stubKube{resources: kube.ResourceList{web, cm}, waitErr: errors.New("job migrate failed: BackoffLimitExceeded")},
			strategy:  kube.LegacyStrategy,
			opts:      []WaitOption{withFetch(liveObjects(deployment("web", false), configMap("cfg")))},
			wantErr:   "failed early due to stalled resources: [Deployment/apps/web status: 'InProgress']",
			wantNames: []string{"web"},
			wantOpts:  1,
		},
		{
			name:      "nothing identified: Helm's error is shown",
			kc:        &stubKube{resources: kube.ResourceList{cm}, waitErr: errors.New("watch failed")},
			strategy:  kube.StatusWatcherStrategy,
			opts:      []WaitOption{withFetch(liveObjects(configMap("cfg")))},
			wantErr:   "resources not ready within 1m0s: watch failed",
			wantNames: []string{},
			wantOpts:  1,
		},
		{
			name:     "hookOnly is refused",
			kc:       &stubKube{resources: kube.ResourceList{web}},
			strategy: kube.HookOnlyStrategy,
			wantErr:  "readiness wait strategy must be",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WaitReady(context.Background(), tt.kc, rel, tt.strategy, tt.jobs, time.Minute, tt.opts...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("WaitReady: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("WaitReady error %v, want it to contain %q", err, tt.wantErr)
			} else if strings.ContainsAny(err.Error(), "\r\n") {
				t.Errorf("WaitReady error spans lines: %q", err)
			}
			if tt.wantNames != nil {
				var nre *NotReadyError
				if !errors.As(err, &nre) {
					t.Fatalf("error %T is not a *NotReadyError", err)
				}
				var names []string
				for _, r := range nre.Resources {
					names = append(names, r.Name)
				}
				if strings.Join(names, ",") != strings.Join(tt.wantNames, ",") {
					t.Errorf("not ready %v, want %v", names, tt.wantNames)
				}
				if nre.Err != tt.kc.waitErr {
					t.Errorf("wrapped error %v, want the waiter's", nre.Err)
				}
			}
			tt.kc.mu.Lock()
			defer tt.kc.mu.Unlock()
			if tt.kc.optCount != tt.wantOpts {
				t.Errorf("waiter options %d, want %d", tt.kc.optCount, tt.wantOpts)
			}
			if tt.kc.waitCalled && tt.kc.withJobs != tt.jobs {
				t.Errorf("WaitWithJobs used = %v, want %v", tt.kc.withJobs, tt.jobs)
			}
			if tt.kc.waitCalled && tt.kc.strategy != tt.strategy {
				t.Errorf("strategy %q, want %q", tt.kc.strategy, tt.strategy)
			}
		})
	}
}

func TestWaitReadyDeadlineExceededIsKept(t *testing.T) {
	rel := &releasev1.Release{Name: relName, Namespace: relNS, Version: 1}
	kc := &stubKube{
		resources: kube.ResourceList{info(cmGVK, "configmaps", relNS, "cfg", configMap("cfg"))},
		waitErr:   errors.Join(helmNotReady("ConfigMap", relNS, "cfg", "InProgress", "x"), context.DeadlineExceeded),
	}
	err := WaitReady(context.Background(), kc, rel, kube.StatusWatcherStrategy, false, time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, DeadlineExceeded) = false", err)
	}
}

// An interrupted wait is not a failed wait: the revision stays pending.
func TestWaitReadyInterrupted(t *testing.T) {
	rel := &releasev1.Release{Name: relName, Namespace: relNS, Version: 1}
	web := info(deployGVK, "deployments", relNS, "web", deployment("web", false))
	kc := &stubKube{resources: kube.ResourceList{web}, block: make(chan struct{})}
	defer close(kc.block)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- WaitReady(ctx, kc, rel, kube.LegacyStrategy, false, time.Minute) }()
	cancel()
	select {
	case err := <-done:
		var nre *NotReadyError
		if !errors.Is(err, context.Canceled) || errors.As(err, &nre) {
			t.Errorf("WaitReady: %v, want context.Canceled and no NotReadyError", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitReady did not return on cancel")
	}
}

func TestWaitReadyArguments(t *testing.T) {
	rel := &releasev1.Release{Name: relName}
	kc := &stubKube{}
	if err := WaitReady(context.Background(), kc, rel, kube.StatusWatcherStrategy, false, 0); err == nil {
		t.Error("zero timeout accepted")
	}
	if err := WaitReady(context.Background(), nil, rel, kube.StatusWatcherStrategy, false, time.Minute); err == nil {
		t.Error("nil client accepted")
	}
	if err := WaitReady(context.Background(), kc, nil, kube.StatusWatcherStrategy, false, time.Minute); err == nil {
		t.Error("nil release accepted")
	}
}

func TestParseStatusWatcherError(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", errors.Join(
		helmNotReady("Namespace", "", "team", "Terminating", "Resource is terminating"),
		errors.Join(helmNotReady("Deployment", relNS, "web", "InProgress", "multi\nline")),
		errors.New("resource that does not match"),
	))
	got := parseStatusWatcherError(err)
	want := []ResourceStatus{
		{Kind: "Namespace", Namespace: "", Name: "team", Status: "Terminating", Message: "Resource is terminating"},
		{Kind: "Deployment", Namespace: relNS, Name: "web", Status: "InProgress", Message: "multi\nline"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
