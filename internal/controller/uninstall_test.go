package controller

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// TestUninstallRunner checks when deleting a HelmRelease uninstalls, skips
// the uninstall, or fails, and that the uninstall uses the release's target.
func TestUninstallRunner(t *testing.T) {
	const kubeconfig = `apiVersion: v1
kind: Config
current-context: remote
contexts:
- name: remote
  context: {cluster: remote, user: admin}
clusters:
- name: remote
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: admin
  user: {token: t}
`
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "deployer"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "remote"}, Data: map[string][]byte{"value": []byte(kubeconfig)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "broken"}, Data: map[string][]byte{"other": []byte(kubeconfig)}},
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
	local := &rest.Config{Host: "https://local.example:6443"}
	helm, err := action.NewConfigFactoryFromRESTConfig(local, action.WithFieldManager(ControllerName))
	if err != nil {
		t.Fatal(err)
	}
	targets, err := connect.NewBuilder(connect.Options{Local: local, Client: c})
	if err != nil {
		t.Fatal(err)
	}

	kubeConfig := func(name string) *meta.KubeConfigReference {
		return &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: name}}
	}
	cases := []struct {
		name         string
		storage      string
		kubeConfig   *meta.KubeConfigReference
		sa           string
		wantRunner   bool
		wantHost     string
		wantErr      string
		wantNotReady bool
	}{
		{name: "never released", kubeConfig: kubeConfig("gone")},
		{name: "local", storage: "apps", wantRunner: true, wantHost: local.Host},
		{name: "local as an existing ServiceAccount", storage: "apps", sa: "deployer", wantRunner: true, wantHost: local.Host},
		{name: "impersonated ServiceAccount gone", storage: "apps", sa: "gone"},
		{name: "kubeconfig Secret gone", storage: "apps", kubeConfig: kubeConfig("gone")},
		{name: "remote", storage: "apps", kubeConfig: kubeConfig("remote"), wantRunner: true, wantHost: "https://127.0.0.1:1"},
		{name: "remote as a ServiceAccount not on this cluster", storage: "apps", kubeConfig: kubeConfig("remote"), sa: "gone",
			wantRunner: true, wantHost: "https://127.0.0.1:1"},
		{name: "kubeconfig Secret without the key", storage: "apps", kubeConfig: kubeConfig("broken"),
			wantErr: "has neither a 'value' nor a 'value.yaml' key", wantNotReady: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recorder := eventlog.New(10)
			r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: recorder, Helm: helm, Targets: targets}
			obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app"}}
			obj.Spec.KubeConfig, obj.Spec.ServiceAccountName = tc.kubeConfig, tc.sa
			obj.Status.StorageNamespace = tc.storage

			runner, err := r.uninstallRunner(context.Background(), obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := conditions.IsFalse(obj, meta.ReadyCondition) &&
				conditions.GetReason(obj, meta.ReadyCondition) == helmv2.UninstallFailedReason; got != tc.wantNotReady {
				t.Errorf("Ready=False/UninstallFailed: %v, want %v", got, tc.wantNotReady)
			}
			if (runner != nil) != tc.wantRunner {
				t.Fatalf("runner %v, want one: %v", runner != nil, tc.wantRunner)
			}
			if runner == nil {
				return
			}
			cfg, err := runner.RESTConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.wantHost {
				t.Errorf("uninstall reaches %s, want %s", cfg.Host, tc.wantHost)
			}
			wantUser := ""
			if tc.sa != "" {
				wantUser = connect.ServiceAccountUsername("apps", tc.sa)
			}
			if cfg.Impersonate.UserName != wantUser {
				t.Errorf("uninstall impersonates %q, want %q", cfg.Impersonate.UserName, wantUser)
			}
		})
	}
}
