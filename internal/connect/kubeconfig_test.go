package connect

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestKubeConfigFromSecret(t *testing.T) {
	secret := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "remote"}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	cases := []struct {
		name    string
		data    map[string]string
		key     string
		want    string
		wantErr string
	}{
		{name: "default key value", data: map[string]string{"value": "a"}, want: "a"},
		{name: "default key value.yaml", data: map[string]string{"value.yaml": "b"}, want: "b"},
		{name: "value wins over value.yaml", data: map[string]string{"value": "a", "value.yaml": "b"}, want: "a"},
		{name: "explicit key", data: map[string]string{"value": "a", "config": "c"}, key: "config", want: "c"},
		{name: "explicit key missing", data: map[string]string{"value": "a"}, key: "config",
			wantErr: "Secret 'apps/remote' has no data under key 'config'"},
		{name: "explicit key empty", data: map[string]string{"config": ""}, key: "config",
			wantErr: "no data under key 'config'"},
		{name: "no default key", data: map[string]string{"kubeconfig": "a"},
			wantErr: "has neither a 'value' nor a 'value.yaml' key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KubeConfigFromSecret(secret(tc.data), tc.key)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if !errors.Is(err, ErrInvalidKubeConfig) {
					t.Errorf("error %v is not ErrInvalidKubeConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// testKubeConfig is a kubeconfig for a server nobody listens on (the
// sanitizer probes it once; a refused connection is quick); extraCluster and
// extraUser are appended to the cluster and user entries.
func testKubeConfig(extraCluster, extraUser string) string {
	return `apiVersion: v1
kind: Config
current-context: remote
contexts:
- name: remote
  context: {cluster: remote, user: deployer}
clusters:
- name: remote
  cluster:
    server: https://127.0.0.1:1
` + extraCluster + `
users:
- name: deployer
  user:
    token: secret-token
` + extraUser
}

func TestRESTConfigFromKubeConfig(t *testing.T) {
	const exec = `    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: aws-iam-authenticator
      interactiveMode: Never
`
	cases := []struct {
		name     string
		data     string
		opts     runtimeclient.KubeConfigOptions
		wantErr  string
		wantExec bool
		insecure bool
	}{
		{name: "token", data: testKubeConfig("", "")},
		// As upstream: what the operator did not allow is dropped, and the
		// rest of the kubeconfig (here the token) is used.
		{name: "exec dropped", data: testKubeConfig("", exec)},
		{name: "exec allowed", data: testKubeConfig("", exec), opts: runtimeclient.KubeConfigOptions{InsecureExecProvider: true}, wantExec: true},
		{name: "insecure TLS dropped", data: testKubeConfig("    insecure-skip-tls-verify: true\n", "")},
		{name: "insecure TLS allowed", data: testKubeConfig("    insecure-skip-tls-verify: true\n", ""),
			opts: runtimeclient.KubeConfigOptions{InsecureTLS: true}, insecure: true},
		{name: "CA file refused", data: testKubeConfig("    certificate-authority: /etc/ca.crt\n", ""),
			wantErr: "references a certificate-authority file"},
		{name: "token file refused", data: strings.Replace(testKubeConfig("", ""), "token: secret-token", "tokenFile: /var/run/token", 1),
			wantErr: "references a tokenFile"},
		{name: "auth provider dropped", data: testKubeConfig("", "    auth-provider:\n      name: oidc\n")},
		{name: "unknown current context", data: strings.Replace(testKubeConfig("", ""), "current-context: remote", "current-context: other", 1),
			wantErr: "current context 'other' not found"},
		{name: "not a kubeconfig", data: "{{{", wantErr: "invalid kubeconfig"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := RESTConfigFromKubeConfig(context.Background(), []byte(tc.data), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if !errors.Is(err, ErrInvalidKubeConfig) {
					t.Errorf("error %v is not ErrInvalidKubeConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != "https://127.0.0.1:1" || cfg.BearerToken != "secret-token" {
				t.Errorf("host %q token %q", cfg.Host, cfg.BearerToken)
			}
			if got := cfg.ExecProvider != nil; got != tc.wantExec {
				t.Errorf("exec provider kept: %v, want %v", got, tc.wantExec)
			}
			if cfg.Insecure != tc.insecure {
				t.Errorf("insecure: %v, want %v", cfg.Insecure, tc.insecure)
			}
			if cfg.AuthProvider != nil {
				t.Errorf("auth provider kept: %v", cfg.AuthProvider)
			}
		})
	}
}

// A kubeconfig's proxy-url is honoured, as upstream's client does: requests
// to the remote cluster go through the proxy, and without one they do not.
func TestRESTConfigFromKubeConfigHonoursProxyURL(t *testing.T) {
	cases := []struct {
		name, extra, want string
	}{
		{"proxy-url", "    proxy-url: http://proxy.example:3128\n", "http://proxy.example:3128"},
		{"no proxy", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := RESTConfigFromKubeConfig(context.Background(), []byte(testKubeConfig(tc.extra, "")), runtimeclient.KubeConfigOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if cfg.Proxy != nil {
					t.Errorf("a proxy is set without proxy-url")
				}
				return
			}
			if cfg.Proxy == nil {
				t.Fatalf("proxy-url %s was dropped", tc.want)
			}
			req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/api", nil)
			u, err := cfg.Proxy(req)
			if err != nil || u == nil || u.String() != tc.want {
				t.Errorf("requests go through %v (%v), want %s", u, err, tc.want)
			}
		})
	}
}

// TestProxyURLCarriesRequests sends a real request with the
// built config and checks it goes through the cluster entry's proxy-url, as
// client-go (and upstream helm-controller) do.
func TestProxyURLCarriesRequests(t *testing.T) {
	var proxied []string
	var mu sync.Mutex
	// A plain HTTP forward proxy: the request line carries the absolute URL of
	// the cluster, which does not resolve, so only the proxy can answer.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		proxied = append(proxied, r.URL.String())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"99","gitVersion":"v1.99.0-proxied"}`))
	}))
	t.Cleanup(proxy.Close)

	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- name: remote
  cluster:
    server: http://remote-cluster.invalid:6443
    proxy-url: ` + proxy.URL + `
users:
- name: u
  user:
    token: secret-token
contexts:
- name: c
  context: {cluster: remote, user: u}
current-context: c
`
	cfg, err := RESTConfigFromKubeConfig(context.Background(), []byte(kubeconfig), runtimeclient.KubeConfigOptions{})
	if err != nil {
		t.Fatalf("RESTConfigFromKubeConfig: %v", err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	v, err := clientset.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("request through the proxy: %v", err)
	}
	if v.GitVersion != "v1.99.0-proxied" {
		t.Fatalf("server version %q, want the proxy's answer", v.GitVersion)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range proxied {
		if strings.HasPrefix(u, "http://remote-cluster.invalid:6443/version") {
			return
		}
	}
	t.Fatalf("proxy saw %v, want a request for http://remote-cluster.invalid:6443/version", proxied)
}
