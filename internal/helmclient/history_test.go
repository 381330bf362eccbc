package helmclient

import (
	"context"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/connect"
)

// testPodTemplate is a Helm test hook: a Pod envtest never runs, whose
// phase the test writes.
const testPodTemplate = `apiVersion: v1
kind: Pod
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    "helm.sh/hook": test
spec:
  restartPolicy: Never
  containers:
  - name: test
    image: example.invalid/test:1
`

func wordsChart(templates map[string]string) *chartv2.Chart {
	c := &chartv2.Chart{Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "words", Version: "1.0.0"}}
	for name, data := range templates {
		c.Templates = append(c.Templates, &common.File{Name: "templates/" + name, Data: []byte(data)})
	}
	return c
}

// TestFailedActionsRecordOneLineInHelmHistory runs Helm's install and test
// actions on our client: a wait that fails is recorded in the release's
// description (what helm history shows) and returned as one line that
// starts with upstream's words.
func TestFailedActionsRecordOneLineInHelmHistory(t *testing.T) {
	c := newWaitCluster(t, "history-words")
	getter := connect.NewGetter(sharedAPIServer.Config(t), c.ns, false)
	kc := NewClient(getter, NewFieldValidation())
	kc.Namespace = c.ns
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.DiscardHandler))
	cfg.RESTClientGetter = getter
	cfg.KubeClient = kc
	cfg.Releases = storage.Init(driver.NewMemory())

	install := func(name string, strategy helmkube.WaitStrategy, chrt *chartv2.Chart) error {
		in := helmaction.NewInstall(cfg)
		in.ReleaseName, in.Namespace = name, c.ns
		in.WaitStrategy, in.Timeout = strategy, 3*time.Second
		_, err := in.RunWithContext(context.Background(), chrt, nil)
		return err
	}
	description := func(t *testing.T, name string) string {
		t.Helper()
		r, err := cfg.Releases.Last(name)
		if err != nil {
			t.Fatal(err)
		}
		rel, ok := r.(*releasev1.Release)
		if !ok {
			t.Fatalf("stored release is %T", r)
		}
		return rel.Info.Description
	}
	check := func(t *testing.T, err error, recorded, want string) {
		t.Helper()
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.ContainsAny(err.Error(), "\r\n") {
			t.Errorf("error %q, want one line starting with %q", err, want)
		}
		if err != nil && recorded != "" && recorded != fmt.Sprintf("Release %q failed: %s", "slow", err) {
			t.Errorf("helm history says %q, want the error after Helm's words", recorded)
		}
	}

	t.Run("install whose wait times out", func(t *testing.T) {
		err := install("slow", helmkube.StatusWatcherStrategy, wordsChart(map[string]string{"deploy.yaml": deploymentManifest("web")}))
		want := "timeout waiting for: [Deployment/history-words/web status: 'InProgress'] (Deployment/history-words/web: "
		check(t, err, description(t, "slow"), want)
	})

	t.Run("test whose Pod fails", func(t *testing.T) {
		chrt := wordsChart(map[string]string{"cm.yaml": configMapManifest("tested-cm", "yes"), "test.yaml": testPodTemplate})
		if err := install("tested", helmkube.HookOnlyStrategy, chrt); err != nil {
			t.Fatalf("install: %v", err)
		}
		go c.failPodOnceCreated(t, "tested-test")
		test := helmaction.NewReleaseTesting(cfg)
		test.Namespace, test.Timeout = c.ns, 30*time.Second
		_, shutdown, err := test.Run("tested")
		if shutdown != nil {
			defer func() { _ = shutdown() }()
		}
		check(t, err, "", "failed early due to stalled resources: [Pod/history-words/tested-test status: 'Failed']")
	})
}

// failPodOnceCreated sets the Pod's phase to Failed, as the kubelet would,
// once the Pod exists.
func (c *waitCluster) failPodOnceCreated(t *testing.T, name string) {
	ctx := context.Background()
	for range 200 {
		pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		pod.Status.Phase = corev1.PodFailed
		if _, err := c.cs.CoreV1().Pods(c.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Errorf("failing the test Pod: %v", err)
		}
		return
	}
	t.Errorf("test Pod %s never created", name)
}
