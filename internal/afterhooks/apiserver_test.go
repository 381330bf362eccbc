package afterhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	helmkube "helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// The tests in this file run a real kube-apiserver and etcd (envtest, no
// controllers: Deployments never become available) from the project's tool
// cache (test/cluster.ToolBinDir). They are skipped with -short.

// sharedAPIServer is started on first use and stopped by TestMain.
var sharedAPIServer = envtestserver.Shared{SkipShort: true}

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }

const deploymentTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: example.invalid/web:1
`

// clusterChart has a ConfigMap, optionally a Deployment (never ready here),
// and a post-install/upgrade hook ConfigMap.
func clusterChart(withDeployment bool) *chartv2.Chart {
	c := testChart("1.0.0")
	if withDeployment {
		c.Templates = append(c.Templates, &common.File{Name: "templates/deploy.yaml", Data: []byte(deploymentTemplate)})
	}
	return c
}

// clusterConfig is a Helm configuration on the API server at restCfg that
// stores releases as Secrets in ns, through wrap when it is not nil.
func clusterConfig(t *testing.T, restCfg *rest.Config, ns string, wrap func(driver.Driver) driver.Driver) *helmaction.Configuration {
	t.Helper()
	getter := connect.NewGetter(restCfg, ns, true)
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	kc := helmkube.New(getter)
	kc.Namespace = ns
	var d driver.Driver = driver.NewSecrets(cs.CoreV1().Secrets(ns))
	if wrap != nil {
		d = wrap(d)
	}
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.RESTClientGetter = getter
	cfg.KubeClient = kc
	cfg.Releases = storage.Init(d)
	return cfg
}

// End to end: a real install with the hookOnly wait and the wrapper, the
// readiness wait with each strategy, then Commit or Fail.
func TestAfterHooksOnAPIServer(t *testing.T) {
	restCfg := sharedAPIServer.Config(t)
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name           string
		withDeployment bool
		strategy       helmkube.WaitStrategy
		wantNotReady   string // empty: ready
	}{
		{name: "ready, status watcher", strategy: helmkube.StatusWatcherStrategy},
		{name: "ready, legacy", strategy: helmkube.LegacyStrategy},
		{name: "not ready, status watcher", withDeployment: true, strategy: helmkube.StatusWatcherStrategy, wantNotReady: "timeout waiting for: [Deployment/%s/web status: 'InProgress'] (Deployment/%s/web: "},
		{name: "not ready, legacy", withDeployment: true, strategy: helmkube.LegacyStrategy, wantNotReady: "timeout waiting for: [Deployment/%s/web status: 'InProgress'] (Deployment/%s/web: "},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("afterhooks-%d", i)
			envtestserver.CreateNamespaces(t, cs, ns)
			var held *Held
			cfg := clusterConfig(t, restCfg, ns, func(d driver.Driver) driver.Driver {
				var w driver.Driver
				w, held = Wrap(d, Target{Name: relName, Timeout: 4 * time.Second})
				return w
			})
			in := helmaction.NewInstall(cfg)
			in.ReleaseName = relName
			in.Namespace = ns
			in.Timeout = 30 * time.Second
			in.WaitStrategy = helmkube.HookOnlyStrategy
			in.WaitForJobs = true
			if _, err := in.Run(clusterChart(tt.withDeployment), nil); err != nil {
				t.Fatalf("install: %v", err)
			}
			if !held.Holding() {
				t.Fatal("nothing held after the install")
			}
			// The hook ran before any readiness wait.
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "post", metav1.GetOptions{}); err != nil {
				t.Fatalf("post-install hook object: %v", err)
			}
			stored, err := cfg.Releases.Get(relName, 1)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := toV1(stored)
			if ok, _ := IsAwaitingReadiness(rel); !ok {
				t.Fatalf("stored v1 is %s %q", rel.Info.Status, rel.Info.Description)
			}

			err = WaitReady(context.Background(), cfg.KubeClient, rel, tt.strategy, true, 4*time.Second)
			if tt.wantNotReady == "" {
				if err != nil {
					t.Fatalf("WaitReady: %v", err)
				}
				if _, err := held.Commit(context.Background(), cfg.Releases.Driver); err != nil {
					t.Fatal(err)
				}
				if got := statuses(t, cfg.Releases.Driver); got != "v1=deployed" {
					t.Errorf("after Commit: %s", got)
				}
				return
			}
			var nre *NotReadyError
			if !errors.As(err, &nre) {
				t.Fatalf("WaitReady: %v, want a *NotReadyError", err)
			}
			t.Logf("WaitReady: %v", err)
			want := fmt.Sprintf(tt.wantNotReady, ns, ns)
			if !strings.HasPrefix(err.Error(), want) || len(nre.Resources) != 1 || strings.Contains(err.Error(), "\n") {
				t.Errorf("WaitReady error %q, want one line starting with %q about exactly one resource", err, want)
			}
			if _, err := held.Fail(context.Background(), cfg.Releases.Driver, err.Error()); err != nil {
				t.Fatal(err)
			}
			failed := mustGet(t, cfg.Releases.Driver, 1)
			if failed.Info.Status != "failed" || failed.Info.Description != fmt.Sprintf("Release %q failed: %s", relName, err) {
				t.Errorf("after Fail: %s %q", failed.Info.Status, failed.Info.Description)
			}
		})
	}
}

// upgradeAction runs Helm's upgrade of relName to chrt with the hookOnly
// wait, as afterHooks runs it.
func upgradeAction(ns string, chrt *chartv2.Chart) func(*helmaction.Configuration) (*releasev1.Release, error) {
	return func(c *helmaction.Configuration) (*releasev1.Release, error) {
		up := helmaction.NewUpgrade(c)
		up.Namespace = ns
		up.Timeout = 30 * time.Second
		up.WaitStrategy = helmkube.HookOnlyStrategy
		r, err := up.RunWithContext(context.Background(), relName, chrt, nil)
		rel, _ := toV1(r)
		return rel, err
	}
}

func installAction(ns string, chrt *chartv2.Chart) func(*helmaction.Configuration) (*releasev1.Release, error) {
	return func(c *helmaction.Configuration) (*releasev1.Release, error) {
		in := helmaction.NewInstall(c)
		in.ReleaseName = relName
		in.Namespace = ns
		in.Timeout = 30 * time.Second
		in.WaitStrategy = helmkube.HookOnlyStrategy
		r, err := in.RunWithContext(context.Background(), chrt, nil)
		rel, _ := toV1(r)
		return rel, err
	}
}

// upgradeChart is testChart at 2.0.0 plus a ConfigMap "extra" and a
// Deployment that never becomes ready here.
func upgradeChart() *chartv2.Chart {
	c := testChart("2.0.0")
	c.Templates = append(c.Templates,
		&common.File{Name: "templates/extra.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n")},
		&common.File{Name: "templates/deploy.yaml", Data: []byte(deploymentTemplate)})
	return c
}

// upgrade.cleanupOnFail under afterHooks: when the readiness wait fails,
// what the failed upgrade created is deleted, as Helm does when its own
// wait fails; what the previous revision had stays.
func TestRunCleanupOnFailOnAPIServer(t *testing.T) {
	restCfg := sharedAPIServer.Config(t)
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, cleanup := range []bool{true, false} {
		t.Run(fmt.Sprintf("cleanupOnFail=%t", cleanup), func(t *testing.T) {
			ns := fmt.Sprintf("cleanup-%t", cleanup)
			envtestserver.CreateNamespaces(t, cs, ns)
			cfg := clusterConfig(t, restCfg, ns, nil)
			a := Action{Verb: "install", Release: relName,
				Readiness: Readiness{Strategy: helmkube.StatusWatcherStrategy, WaitForJobs: true, Timeout: 5 * time.Second}}
			if _, err := run(context.Background(), cfg, a, installAction(ns, testChart("1.0.0"))); err != nil {
				t.Fatalf("install: %v", err)
			}
			a.Verb, a.CleanupOnFail = "upgrade", cleanup
			rel, err := run(context.Background(), cfg, a, upgradeAction(ns, upgradeChart()))
			var nre *NotReadyError
			if !errors.As(err, &nre) {
				t.Fatalf("upgrade: %v, want the readiness wait to fail", err)
			}
			if rel == nil || rel.Version != 2 || rel.Info.Status != "failed" {
				t.Fatalf("upgrade returned %+v, want v2 failed", rel)
			}
			if got := statuses(t, cfg.Releases.Driver); got != "v1=deployed v2=failed" {
				t.Errorf("storage: %s", got)
			}
			// The wait's words lead; the condition's message says where it ran.
			words := fmt.Sprintf("timeout waiting for: [Deployment/%s/web status: 'InProgress'] (", ns)
			if got := err.Error(); !strings.HasPrefix(got, words+"readiness wait after the post-upgrade hooks; Deployment/") || strings.Contains(got, "\n") {
				t.Errorf("upgrade error %q, want one line starting with %q and where the wait ran", got, words)
			}
			if want := fmt.Sprintf("Upgrade %q failed: %s", relName, words+"Deployment/"); !strings.HasPrefix(rel.Info.Description, want) || strings.Contains(rel.Info.Description, "\n") {
				t.Errorf("helm history says %q, want one line starting with %q", rel.Info.Description, want)
			}
			ctx := context.Background()
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, relName+"-cm", metav1.GetOptions{}); err != nil {
				t.Errorf("the ConfigMap of v1: %v", err)
			}
			_, extraErr := cs.CoreV1().ConfigMaps(ns).Get(ctx, "extra", metav1.GetOptions{})
			dep, depErr := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if !cleanup {
				if extraErr != nil || depErr != nil {
					t.Errorf("without cleanupOnFail the new objects must stay: configmap %v, deployment %v", extraErr, depErr)
				}
				return
			}
			if !apierrors.IsNotFound(extraErr) {
				t.Errorf("ConfigMap extra, created by the failed upgrade: %v, want deleted", extraErr)
			}
			// Background propagation: the Deployment may linger with a
			// deletion timestamp until the garbage collector runs.
			if depErr == nil && dep.DeletionTimestamp == nil {
				t.Error("Deployment web, created by the failed upgrade, was not deleted")
			} else if depErr != nil && !apierrors.IsNotFound(depErr) {
				t.Error(depErr)
			}
		})
	}
}

// A hook whose previous object is still terminating (a finalizer holds it)
// is re-created only once that object is gone: Helm deletes hooks before
// creating them again (before-hook-creation), and under afterHooks the
// deletion is awaited as it is under beforeHooks. Helm's own hookOnly wait
// does not await it: the new hook is then applied onto the terminating
// object and vanishes with it.
func TestRunAwaitsHookDeletionsOnAPIServer(t *testing.T) {
	restCfg := sharedAPIServer.Config(t)
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns, finalizer = "hook-deletion", "test.afterhooks.io/hold"
	envtestserver.CreateNamespaces(t, cs, ns)
	ctx := context.Background()
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "post", Namespace: ns, Finalizers: []string{finalizer}}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "post", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(2 * time.Second)
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "post", metav1.GetOptions{})
		if err == nil {
			cm.Finalizers = nil
			_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		}
		released <- err
	}()

	cfg := clusterConfig(t, restCfg, ns, nil)
	a := Action{Verb: "install", Release: relName,
		Readiness: Readiness{Strategy: helmkube.StatusWatcherStrategy, WaitForJobs: true, Timeout: 10 * time.Second}}
	rel, err := run(ctx, cfg, a, installAction(ns, testChart("1.0.0")))
	if err := <-released; err != nil {
		t.Fatalf("releasing the finalizer: %v", err)
	}
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if rel.Info.Status != "deployed" {
		t.Errorf("install ended %s", rel.Info.Status)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "post", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp != nil || len(cm.Finalizers) != 0 {
		t.Errorf("hook ConfigMap after the install: %+v, %v; want the new one", cm, err)
	}
}
