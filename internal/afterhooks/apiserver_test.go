package afterhooks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// The tests in this file run a real kube-apiserver and etcd (envtest, no
// controllers: Deployments never become available) from the project's tool
// cache (test/cluster.ToolBinDir). They are skipped with -short.

// sharedAPIServer is started on first use and stopped by TestMain.
var sharedAPIServer envtestserver.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	sharedAPIServer.Stop()
	os.Exit(code)
}

func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an API server")
	}
	return sharedAPIServer.Config(t)
}

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

// End to end: a real install with the hookOnly wait and the wrapper, the
// readiness wait with each strategy, then Commit or Fail.
func TestAfterHooksOnAPIServer(t *testing.T) {
	restCfg := apiServer(t)
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	factory, err := action.NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name           string
		withDeployment bool
		strategy       kube.WaitStrategy
		wantNotReady   string // empty: ready
	}{
		{name: "ready, status watcher", strategy: kube.StatusWatcherStrategy},
		{name: "ready, legacy", strategy: kube.LegacyStrategy},
		{name: "not ready, status watcher", withDeployment: true, strategy: kube.StatusWatcherStrategy, wantNotReady: "Deployment/%s/web: InProgress"},
		{name: "not ready, legacy", withDeployment: true, strategy: kube.LegacyStrategy, wantNotReady: "Deployment/%s/web: InProgress"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("afterhooks-%d", i)
			if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			var held *Held
			cfg, err := factory.Build(ns, ns, action.WithStorageDriver(func(d driver.Driver) driver.Driver {
				var w driver.Driver
				w, held = Wrap(d, Target{Name: relName, Timeout: 4 * time.Second})
				return w
			}))
			if err != nil {
				t.Fatal(err)
			}
			in := helmaction.NewInstall(cfg)
			in.ReleaseName = relName
			in.Namespace = ns
			in.Timeout = 30 * time.Second
			in.WaitStrategy = kube.HookOnlyStrategy
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
			want := fmt.Sprintf(tt.wantNotReady, ns)
			if !strings.Contains(err.Error(), want) || len(nre.Resources) != 1 {
				t.Errorf("WaitReady error %q, want exactly one resource, %q", err, want)
			}
			if _, err := held.Fail(context.Background(), cfg.Releases.Driver, err.Error()); err != nil {
				t.Fatal(err)
			}
			failed := mustGet(t, cfg.Releases.Driver, 1)
			if failed.Info.Status != "failed" || !strings.Contains(failed.Info.Description, want) {
				t.Errorf("after Fail: %s %q", failed.Info.Status, failed.Info.Description)
			}
		})
	}
}
