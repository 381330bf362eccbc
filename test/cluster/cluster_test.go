package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const wantServerVersion = "v1.36.3"

// testLogger sends the cluster's progress lines to the test log.
type testLogger struct{ t testing.TB }

func (l testLogger) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// keepDirEnv keeps a cluster's directory (logs, etcd data) after the test
// when set to any value, for post-mortems.
const keepDirEnv = "TEST_CLUSTER_KEEP_DIR"

// startCluster starts a cluster for t or fails it.
func startCluster(ctx context.Context, t testing.TB, opts Options) (*Cluster, time.Duration) {
	t.Helper()
	c, took, err := launch(ctx, t, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c, took
}

// launch starts a cluster and arranges for it to be stopped when t ends,
// quoting the end of every component log first if t failed. It does not
// fail t itself, so other goroutines may call it.
func launch(ctx context.Context, t testing.TB, opts Options) (*Cluster, time.Duration, error) {
	opts.Logs = testLogger{t}
	opts.KeepDir = os.Getenv(keepDirEnv) != ""
	began := time.Now()
	c, err := Start(ctx, opts)
	if err != nil {
		return nil, 0, err
	}
	took := time.Since(began)
	t.Cleanup(func() {
		if t.Failed() {
			for _, comp := range requiredBinaries {
				t.Logf("--- %s log tail:\n%s", comp, logTail(c.LogFile(comp), 15))
			}
		}
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c, took, nil
}

func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, took := startCluster(ctx, t, Options{Name: "single", ExtraCRDDirs: []string{"testdata/crds"}})
	t.Logf("Start took %s", took.Round(time.Millisecond))

	client := kubernetes.NewForConfigOrDie(c.RESTConfig())

	t.Run("server version", func(t *testing.T) {
		v, err := client.Discovery().ServerVersion()
		if err != nil {
			t.Fatalf("server version: %v", err)
		}
		if v.GitVersion != wantServerVersion {
			t.Errorf("server version = %s, want %s", v.GitVersion, wantServerVersion)
		}
	})

	t.Run("kubeconfig file works", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
		if err != nil {
			t.Fatalf("loading %s: %v", c.Kubeconfig(), err)
		}
		kc := kubernetes.NewForConfigOrDie(cfg)
		if _, err := kc.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err != nil {
			t.Errorf("reading kube-system through the kubeconfig file: %v", err)
		}
	})

	t.Run("source-controller", func(t *testing.T) {
		crds := apiextensions.NewForConfigOrDie(c.RESTConfig())
		crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx,
			"helmrepositories.source.toolkit.fluxcd.io", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("HelmRepository CRD: %v", err)
		}
		if !crdEstablished(crd) {
			t.Errorf("HelmRepository CRD not established: %+v", crd.Status.Conditions)
		}
		// Any HTTP answer proves the artifact server listens where the
		// cluster says; the root holds no artifact, so 404 is expected.
		resp, err := http.Get(c.SourceControllerStorageURL() + "/")
		if err != nil {
			t.Fatalf("artifact server: %v", err)
		}
		resp.Body.Close()
	})

	t.Run("extra CRDs", func(t *testing.T) {
		widgets := schema.GroupVersionResource{Group: "test.afterhooks.io", Version: "v1", Resource: "widgets"}
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.afterhooks.io/v1",
			"kind":       "Widget",
			"metadata":   map[string]any{"name": "w"},
			"spec":       map[string]any{"size": int64(3)},
		}}
		// Start returned, so the CRD must already be served: no retry.
		_, err := dynamic.NewForConfigOrDie(c.RESTConfig()).Resource(widgets).Namespace(metav1.NamespaceDefault).
			Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("creating a Widget from the extra CRD: %v", err)
		}
	})

	// The workload tests share the cluster and run concurrently, as real
	// test suites will.
	t.Run("workloads", func(t *testing.T) {
		t.Run("deployment becomes available", func(t *testing.T) {
			t.Parallel()
			testDeploymentAvailable(ctx, t, client)
		})
		t.Run("job completes", func(t *testing.T) {
			t.Parallel()
			testJobCompletes(ctx, t, client)
		})
	})

	if err := c.Err(); err != nil {
		t.Errorf("cluster unhealthy after the tests: %v", err)
	}
}

func testDeploymentAvailable(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	labels := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: metav1.NamespaceDefault},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "registry.example/web:1.0",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi"),
					}},
				}}},
			},
		},
	}
	began := time.Now()
	if _, err := client.AppsV1().Deployments(dep.Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating deployment: %v", err)
	}
	waitFor(ctx, t, "deployment Available with 2 ready replicas", func() (bool, error) {
		got, err := client.AppsV1().Deployments(dep.Namespace).Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.AvailableReplicas != 2 {
			return false, fmt.Errorf("available replicas %d", got.Status.AvailableReplicas)
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	t.Logf("deployment available after %s", time.Since(began).Round(time.Millisecond))

	// The pods really ran through the scheduler and kwok: bound to a fake
	// node, Running and Ready.
	pods, err := client.CoreV1().Pods(dep.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("got %d pods, want 2", len(pods.Items))
	}
	for _, pod := range pods.Items {
		if !strings.HasPrefix(pod.Spec.NodeName, "kwok-node-") || pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q phase %s, want a kwok node and Running", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
		}
	}
}

func testJobCompletes(ctx context.Context, t *testing.T, client kubernetes.Interface) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: metav1.NamespaceDefault},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "migrate", Image: "registry.example/migrate:1.0"}},
			}},
		},
	}
	began := time.Now()
	if _, err := client.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating job: %v", err)
	}
	waitFor(ctx, t, "job Complete", func() (bool, error) {
		got, err := client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				return false, fmt.Errorf("job failed: %s", cond.Message)
			}
		}
		return false, fmt.Errorf("succeeded %d, conditions %+v", got.Status.Succeeded, got.Status.Conditions)
	})
	t.Logf("job complete after %s", time.Since(began).Round(time.Millisecond))
}

// TestClustersSideBySide starts two clusters at once and checks that they
// share nothing: ports, data or credentials.
func TestClustersSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two clusters")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	names := []string{"left", "right"}
	clusters := make([]*Cluster, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			c, took, err := launch(ctx, t, Options{Name: name})
			clusters[i], errs[i] = c, err
			if err == nil {
				t.Logf("%s started in %s", name, took.Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("Start: %v", err)
	}
	left, right := clusters[0], clusters[1]
	if left.APIServerURL() == right.APIServerURL() || left.Dir() == right.Dir() ||
		left.SourceControllerStorageURL() == right.SourceControllerStorageURL() {
		t.Fatalf("clusters share an address or directory: %s %s, %s %s",
			left.APIServerURL(), left.Dir(), right.APIServerURL(), right.Dir())
	}

	leftClient := kubernetes.NewForConfigOrDie(left.RESTConfig())
	rightClient := kubernetes.NewForConfigOrDie(right.RESTConfig())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "only-left"}}
	if _, err := leftClient.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace in left: %v", err)
	}
	if _, err := rightClient.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace created in left, lookup in right: err = %v, want NotFound", err)
	}

	// Credentials of one cluster must not work against the other: each has
	// its own certificate authority.
	crossed := left.RESTConfig()
	crossed.Host = right.APIServerURL()
	_, err := kubernetes.NewForConfigOrDie(crossed).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err == nil {
		t.Errorf("left's credentials were accepted by right")
	}

	// Stopping one leaves the other running.
	if err := left.Stop(); err != nil {
		t.Fatalf("stopping left: %v", err)
	}
	if _, err := rightClient.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("right after stopping left: %v", err)
	}
	if !errors.Is(left.Err(), ErrStopped) || right.Err() != nil {
		t.Errorf("Err: left %v (want ErrStopped), right %v (want nil)", left.Err(), right.Err())
	}
}

// waitFor polls cond until it holds, failing t with cond's last complaint.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := poll(ctx, 250*time.Millisecond, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestStartFailureReportsLogAndCleansUp replaces the API server with a
// script that fails at once: Start must say which component failed, quote
// its log, and leave no process of the cluster running.
func TestStartFailureReportsLogAndCleansUp(t *testing.T) {
	tools, err := findBinaries("")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range append(slices.Clone(requiredBinaries), sourceCRDDir) {
		if err := os.Symlink(tools.path(name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	fake := filepath.Join(bin, binAPIServer)
	if err := os.Remove(fake); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho 'E0101 fake failure: flag --nonsense is wrong' >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Name: "broken", Dir: dir, BinDir: bin})
	if err == nil {
		c.Stop()
		t.Fatal("Start succeeded with a failing API server")
	}
	for _, want := range []string{"kube-apiserver exited unexpectedly", "exit status 3", "fake failure: flag --nonsense"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
	t.Logf("Start error:\n%v", err)
	// etcd was running before the API server failed; it must be gone.
	if leftovers := processesMentioning(t, dir); len(leftovers) > 0 {
		t.Errorf("processes left running: %v", leftovers)
	}
}

// processesMentioning lists running processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	found, err := ProcessesMentioning(s)
	if err != nil {
		t.Skipf("cannot inspect processes: %v", err)
	}
	return found
}
