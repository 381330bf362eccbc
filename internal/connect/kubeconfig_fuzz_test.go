package connect

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The Secret and its kubeconfig are written by whoever owns the HelmRelease's
// namespace (or by Cluster API), not by the controller's operator, so both
// are untrusted input to a process that holds the controller's credentials.

// FuzzKubeConfigFromSecret: the data returned is the one under the key the
// user named or, without one, under the first non-empty default key; every
// refusal is ErrInvalidKubeConfig (no retry until the Secret changes) and
// names the Secret.
func FuzzKubeConfigFromSecret(f *testing.F) {
	kc := []byte(testKubeConfig("", ""))
	// The cases of TestKubeConfigFromSecret, as two data entries and a key.
	f.Add("value", []byte("a"), "", []byte(nil), "")
	f.Add("value.yaml", []byte("b"), "", []byte(nil), "")
	f.Add("value", []byte("a"), "value.yaml", []byte("b"), "")
	f.Add("value", []byte("a"), "config", []byte("c"), "config")
	f.Add("value", []byte("a"), "", []byte(nil), "config")
	f.Add("config", []byte(""), "", []byte(nil), "config")
	f.Add("kubeconfig", []byte("a"), "", []byte(nil), "")
	// An empty default key falls through to the next one.
	f.Add("value", []byte(""), "value.yaml", kc, "")
	f.Add("value", kc, "value", []byte("shadowed"), "value")
	f.Add("", kc, "", []byte(nil), "")
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte, key string) {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "remote"},
			Data: map[string][]byte{k1: v1, k2: v2}}
		got, err := KubeConfigFromSecret(secret, key)

		var want []byte
		if key != "" {
			want = secret.Data[key]
		} else if want = secret.Data[DefaultKubeConfigSecretKey]; len(want) == 0 {
			want = secret.Data[DefaultKubeConfigSecretKeyExt]
		}
		if len(want) == 0 {
			if err == nil {
				t.Fatalf("data %q, key %q: got %q, want an error", secret.Data, key, got)
			}
			if !errors.Is(err, ErrInvalidKubeConfig) || !strings.Contains(err.Error(), "'apps/remote'") {
				t.Fatalf("error %q: want ErrInvalidKubeConfig naming the Secret", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("data %q, key %q: %v", secret.Data, key, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("data %q, key %q: got %q, want %q", secret.Data, key, got, want)
		}
	})
}

// validKubeConfigSeeds are the seeds RESTConfigFromKubeConfig must accept
// with default options; mutations of them may go either way.
var validKubeConfigSeeds = map[string]bool{}

// FuzzRESTConfigFromKubeConfig: whatever the bytes, the result is either an
// ErrInvalidKubeConfig or a REST config for the server of the current
// context's cluster that carries none of what the controller leaves out or
// refuses: no exec plugin, no auth-provider, no files of the controller's
// file system, and TLS verification unless the operator allowed skipping it.
//
// Exec is never allowed here: the sanitiser probes the server with the
// config it built, and with exec allowed that probe would run a command the
// fuzzer chose. The probe itself gets a cancelled context so that no input
// makes the test dial out (or wait on DNS); it then fails fast, which only
// leaves the config's rate limiter at its default.
func FuzzRESTConfigFromKubeConfig(f *testing.F) {
	const exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws-iam-authenticator\n"
	valid := []string{
		testKubeConfig("", ""),
		testKubeConfig("    proxy-url: http://proxy.example:3128\n", ""),
		testKubeConfig("    tls-server-name: api.example\n", ""),
		// A server with a path: client-go drops its query and fragment.
		strings.Replace(testKubeConfig("", ""), "https://127.0.0.1:1", "https://example.invalid:6443/k8s/clusters/c-1?x=1#frag", 1),
		// JSON is a kubeconfig too.
		`{"apiVersion":"v1","kind":"Config","current-context":"c","contexts":[{"name":"c","context":{"cluster":"k","user":"u"}}],` +
			`"clusters":[{"name":"k","cluster":{"server":"http://10.0.0.1:8080"}}],"users":[{"name":"u","user":{"username":"a","password":"b"}}]}`,
	}
	for _, s := range valid {
		validKubeConfigSeeds[s] = true
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		// What TestRESTConfigFromKubeConfig refuses or leaves out.
		testKubeConfig("", exec),
		testKubeConfig("    insecure-skip-tls-verify: true\n", ""),
		testKubeConfig("    certificate-authority: /etc/ca.crt\n", ""),
		strings.Replace(testKubeConfig("", ""), "token: secret-token", "tokenFile: /var/run/token", 1),
		testKubeConfig("", "    client-certificate: /etc/cert.pem\n    client-key: /etc/key.pem\n"),
		testKubeConfig("", "    auth-provider:\n      name: oidc\n"),
		strings.Replace(testKubeConfig("", ""), "current-context: remote", "current-context: other", 1),
		strings.Replace(testKubeConfig("", ""), "server: https://127.0.0.1:1", "server: ''", 1),
		strings.Replace(testKubeConfig("", ""), "context: {cluster: remote, user: deployer}", "context: {cluster: gone, user: deployer}", 1),
		testKubeConfig("    certificate-authority-data: bm90IGEgY2VydA==\n", ""),
		"{{{",
		"",
		"apiVersion: v1\nkind: Config\n",
		"- just\n- a list\n",
		"\x00\xff",
		// A server without a scheme and no CA is plain HTTP: the
		// token is dropped (found by the fuzzer, a wrong expectation).
		strings.Replace(testKubeConfig("", ""), "server: https://127.0.0.1:1", "server: 0A", 1),
		// A path that is all there is to the URL, re-encoded by client-go.
		strings.Replace(testKubeConfig("", ""), "server: https://127.0.0.1:1", "server: // 0", 1),
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(testKubeConfig("    insecure-skip-tls-verify: true\n", "")), true)
	f.Add([]byte(testKubeConfig("", "")), true)

	f.Fuzz(func(t *testing.T, data []byte, insecureTLS bool) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		opts := runtimeclient.KubeConfigOptions{InsecureTLS: insecureTLS}
		cfg, err := RESTConfigFromKubeConfig(ctx, data, opts)
		if err != nil {
			if !errors.Is(err, ErrInvalidKubeConfig) {
				t.Fatalf("error %q is not ErrInvalidKubeConfig", err)
			}
			if validKubeConfigSeeds[string(data)] && !insecureTLS {
				t.Fatalf("a valid kubeconfig was refused: %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("no error and no config")
		}
		raw, err := clientcmd.Load(data)
		if err != nil {
			t.Fatalf("accepted bytes clientcmd cannot load: %v", err)
		}
		kctx := raw.Contexts[raw.CurrentContext]
		if kctx == nil {
			t.Fatalf("accepted a kubeconfig without its current context %q", raw.CurrentContext)
		}
		cluster := raw.Clusters[kctx.Cluster]
		if cluster == nil {
			t.Fatalf("accepted a kubeconfig without the cluster %q of its current context", kctx.Cluster)
		}
		if !sameServer(cfg.Host, cluster.Server) {
			t.Fatalf("host %q, want the server %q of cluster %q", cfg.Host, cluster.Server, kctx.Cluster)
		}

		if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
			t.Fatalf("a credential plugin survived: exec %v, auth-provider %v", cfg.ExecProvider, cfg.AuthProvider)
		}
		if cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "" || cfg.BearerTokenFile != "" {
			t.Fatalf("a file reference survived: CA %q cert %q key %q token %q", cfg.CAFile, cfg.CertFile, cfg.KeyFile, cfg.BearerTokenFile)
		}
		if cfg.Insecure && !insecureTLS {
			t.Fatal("TLS verification disabled without --insecure-kubeconfig-tls")
		}
		if user := raw.AuthInfos[kctx.AuthInfo]; user != nil {
			// client-go leaves the user's credentials out of a config
			// whose transport is plain HTTP; they must not come back.
			want := ""
			if rest.IsConfigTransportTLS(*cfg) {
				want = user.Token
			}
			if cfg.BearerToken != want {
				t.Fatalf("bearer token %q, want %q (user %q's token %q, TLS %v)",
					cfg.BearerToken, want, kctx.AuthInfo, user.Token, rest.IsConfigTransportTLS(*cfg))
			}
			if !rest.IsConfigTransportTLS(*cfg) && (cfg.Password != "" || len(cfg.KeyData) > 0) {
				t.Fatalf("credentials kept for a plain HTTP server %q", cfg.Host)
			}
		}
	})
}

// sameServer tells whether host, as client-go sets it from a cluster's
// server, addresses that server: the same text, or the same URL without its
// query and fragment (client-go drops those, re-encoding the rest, when the
// URL has a path).
func sameServer(host, server string) bool {
	if host == server {
		return true
	}
	s, err := url.ParseRequestURI(server)
	if err != nil {
		return false
	}
	s.RawQuery, s.Fragment, s.RawFragment = "", "", ""
	return host == s.String()
}
