package connect

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/cache"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestBuild(t *testing.T) {
	local := &rest.Config{Host: "https://local.example:6443", QPS: 50, Burst: 300}
	objects := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "remote"},
			Data: map[string][]byte{"value": []byte(testKubeConfig("", ""))}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "broken"},
			Data: map[string][]byte{"value": []byte("not: [a kubeconfig")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "no-provider"}, Data: map[string]string{}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "typo"}, Data: map[string]string{"provider": "gke"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "generic-no-address"}, Data: map[string]string{"provider": "generic"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "generic-http"},
			Data: map[string]string{"provider": "generic", "address": "http://remote.example"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "aws-no-cluster"},
			Data: map[string]string{"provider": "aws", "address": "https://eks.example", "ca.crt": "pem"}},
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objects...).Build()

	secretRef := func(name, key string) *meta.KubeConfigReference {
		return &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: name, Key: key}}
	}
	configMapRef := func(name string) *meta.KubeConfigReference {
		return &meta.KubeConfigReference{ConfigMapRef: &meta.LocalObjectReference{Name: name}}
	}
	cases := []struct {
		name       string
		defaultSA  string
		req        Request
		wantHost   string
		wantUser   string
		wantRemote bool
		wantShared bool
		wantErr    string
		notFound   bool
	}{
		{name: "local", req: Request{Persistent: true}, wantHost: local.Host, wantShared: true},
		{name: "local, fresh client per action", req: Request{}, wantHost: local.Host},
		{name: "local as a ServiceAccount", req: Request{ServiceAccountName: "deployer", Persistent: true},
			wantHost: local.Host, wantUser: "system:serviceaccount:apps:deployer"},
		{name: "local as the default ServiceAccount", defaultSA: "tenant", req: Request{Persistent: true},
			wantHost: local.Host, wantUser: "system:serviceaccount:apps:tenant"},
		{name: "the spec's ServiceAccount wins over the default", defaultSA: "tenant", req: Request{ServiceAccountName: "deployer"},
			wantHost: local.Host, wantUser: "system:serviceaccount:apps:deployer"},
		{name: "remote", req: Request{KubeConfig: secretRef("remote", ""), Persistent: true},
			wantHost: "https://127.0.0.1:1", wantRemote: true},
		{name: "remote as a ServiceAccount of the remote cluster", req: Request{KubeConfig: secretRef("remote", ""), ServiceAccountName: "deployer"},
			wantHost: "https://127.0.0.1:1", wantRemote: true, wantUser: "system:serviceaccount:apps:deployer"},
		{name: "remote with the default ServiceAccount", defaultSA: "tenant", req: Request{KubeConfig: secretRef("remote", "")},
			wantHost: "https://127.0.0.1:1", wantRemote: true, wantUser: "system:serviceaccount:apps:tenant"},
		{name: "missing Secret", req: Request{KubeConfig: secretRef("gone", "")},
			wantErr: "could not get kubeconfig Secret 'apps/gone'", notFound: true},
		{name: "missing key", req: Request{KubeConfig: secretRef("remote", "config")},
			wantErr: "Secret 'apps/remote' has no data under key 'config'"},
		{name: "invalid kubeconfig", req: Request{KubeConfig: secretRef("broken", "")},
			wantErr: "kubeconfig Secret 'apps/broken': invalid kubeconfig"},
		{name: "both references", req: Request{KubeConfig: &meta.KubeConfigReference{
			SecretRef: &meta.SecretKeyReference{Name: "remote"}, ConfigMapRef: &meta.LocalObjectReference{Name: "x"}}},
			wantErr: "sets both secretRef and configMapRef"},
		{name: "no reference", req: Request{KubeConfig: &meta.KubeConfigReference{}}, wantErr: "sets neither secretRef nor configMapRef"},
		{name: "missing ConfigMap", req: Request{KubeConfig: configMapRef("gone")},
			wantErr: "could not get kubeconfig ConfigMap 'apps/gone'", notFound: true},
		{name: "ConfigMap without provider", req: Request{KubeConfig: configMapRef("no-provider")},
			wantErr: "ConfigMap 'apps/no-provider' has no 'provider' key; set it to one of aws, azure, gcp, generic"},
		{name: "unknown provider", req: Request{KubeConfig: configMapRef("typo")}, wantErr: "unknown provider 'gke'"},
		{name: "generic without address", req: Request{KubeConfig: configMapRef("generic-no-address")},
			wantErr: "the generic provider needs the API server's 'address'"},
		{name: "generic over plain HTTP", req: Request{KubeConfig: configMapRef("generic-http")}, wantErr: "must use https scheme"},
		{name: "aws without cluster ARN", req: Request{KubeConfig: configMapRef("aws-no-cluster")},
			wantErr: "provider aws needs the 'cluster' ARN"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBuilder(Options{Local: local, Client: c, DefaultServiceAccount: tc.defaultSA})
			if err != nil {
				t.Fatal(err)
			}
			tc.req.Kind, tc.req.Namespace, tc.req.Name, tc.req.ReleaseNamespace = "HelmRelease", "apps", "app", "apps"
			target, err := b.Build(context.Background(), tc.req)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got := apierrors.IsNotFound(err); got != tc.notFound {
					t.Errorf("IsNotFound %v, want %v", got, tc.notFound)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := target.ToRESTConfig()
			if cfg.Host != tc.wantHost {
				t.Errorf("host %q, want %q", cfg.Host, tc.wantHost)
			}
			if username(target) != tc.wantUser {
				t.Errorf("impersonates %q, want %q", username(target), tc.wantUser)
			}
			if target.Remote != tc.wantRemote || target.Shared() != tc.wantShared {
				t.Errorf("remote %v shared %v, want %v %v", target.Remote, target.Shared(), tc.wantRemote, tc.wantShared)
			}
			if cfg.QPS != local.QPS || cfg.Burst != local.Burst {
				t.Errorf("QPS/burst %v/%d, want the controller's %v/%d", cfg.QPS, cfg.Burst, local.QPS, local.Burst)
			}
			// No per-request time limit, remote clusters included (listed
			// in docs/differences.md): readiness waits watch for minutes.
			if cfg.Timeout != 0 {
				t.Errorf("per-request timeout %s, want none", cfg.Timeout)
			}
		})
	}
}

func TestGetterPersistence(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, persistent := range []bool{true, false} {
		g := NewGetter(cfg, "apps", persistent)
		m1, err := g.ToRESTMapper()
		if err != nil {
			t.Fatal(err)
		}
		m2, _ := g.ToRESTMapper()
		d1, _ := g.ToDiscoveryClient()
		d2, _ := g.ToDiscoveryClient()
		if same := m1 == m2 && d1 == d2; same != persistent {
			t.Errorf("persistent=%v: mapper and discovery reused = %v", persistent, same)
		}
		if ns, _, _ := g.ToRawKubeConfigLoader().Namespace(); ns != "apps" {
			t.Errorf("default namespace %q", ns)
		}
	}
}

func TestForget(t *testing.T) {
	var nilBuilder *Builder
	nilBuilder.Forget("HelmRelease", "apps", "app") // must not panic
	tc, err := cache.NewTokenCache(10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBuilder(Options{Local: &rest.Config{}, Client: fake.NewClientBuilder().Build(), TokenCache: tc})
	if err != nil {
		t.Fatal(err)
	}
	b.Forget("HelmRelease", "apps", "app")
}

// username is the user name target impersonates, or "" without
// impersonation.
func username(target *Target) string {
	cfg, _ := target.ToRESTConfig()
	return cfg.Impersonate.UserName
}
