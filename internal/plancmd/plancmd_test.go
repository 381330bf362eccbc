package plancmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/scheme"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

var apiServer = envtestserver.Shared{SourceCRDs: true}

func TestMain(m *testing.M) { apiServer.Main(m) }

var crdOnce sync.Once

// cluster is a namespace on the shared API server with the HelmRelease
// CRD, and a kubeconfig of it.
type cluster struct {
	ns         string
	cfg        *rest.Config
	c          client.Client
	kubeconfig string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	cfg := apiServer.Config(t)
	var err error
	crdOnce.Do(func() {
		_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{"../../config/crd/bases"}, ErrorIfPathMissing: true})
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("plan-%d", time.Now().UnixNano()%1000000)
	envtestserver.CreateNamespaces(t, kubernetes.NewForConfigOrDie(cfg), ns)
	return &cluster{ns: ns, cfg: cfg, c: c, kubeconfig: writeKubeconfig(t, cfg, "")}
}

// writeKubeconfig writes cfg as a kubeconfig, impersonating user when
// set.
func writeKubeconfig(t *testing.T, cfg *rest.Config, user string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken, Impersonate: user}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// chartDir writes a chart of one ConfigMap holding .Values.data.
func chartDir(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":          fmt.Sprintf("apiVersion: v2\nname: web\nversion: %s\n", version),
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: {{ .Values.a | quote }}\n",
		"templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-weight: \"-1\"\n",
	}
	writeFiles(t, dir, files)
	return dir
}

// writeFiles writes files (relative path to content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *cluster) createHR(t *testing.T, name string, mutate func(*v2.HelmRelease)) *v2.HelmRelease {
	t.Helper()
	obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns}}
	obj.Spec.Interval = metav1.Duration{Duration: time.Minute}
	obj.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "charts"}
	obj.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(`{"a":"1"}`)}
	if mutate != nil {
		mutate(obj)
	}
	if err := c.c.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, &out, &errOut, false)
	return code, out.String(), errOut.String()
}

// The first plan of a HelmRelease not installed yet is an install (exit
// 1), with its objects and hook; -o json carries the same.
func TestPlanCommandInstall(t *testing.T) {
	c := newCluster(t)
	c.createHR(t, "web", nil)
	code, out, errOut := run(t, "-n", c.ns, "web", "--chart", chartDir(t, "1.0.0"), "--kubeconfig", c.kubeconfig)
	if code != ExitChanges || errOut != "" {
		t.Fatalf("exit %d, stderr %q, want %d", code, errOut, ExitChanges)
	}
	for _, want := range []string{"next step: install", "+ ConfigMap/web", "pre-install   weight -1   ConfigMap/migrate"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colour in output that is not a terminal")
	}
	code, out, _ = run(t, "-n", c.ns, "web", "--chart", chartDir(t, "1.0.0"), "--kubeconfig", c.kubeconfig, "-o", "json")
	if code != ExitChanges || !strings.Contains(out, `"step": "install"`) {
		t.Errorf("json: exit %d\n%s", code, out)
	}
}

// Each bad input is one line on stderr, exit 2, nothing else printed.
func TestPlanCommandBadInput(t *testing.T) {
	c := newCluster(t)
	c.createHR(t, "web", nil)
	c.createHR(t, "badvalues", func(o *v2.HelmRelease) {
		o.Spec.ValuesFrom = []meta.ValuesReference{{Kind: "ConfigMap", Name: "missing"}}
	})
	c.createHR(t, "notamap", func(o *v2.HelmRelease) {
		o.Spec.ValuesFrom = []meta.ValuesReference{{Kind: "ConfigMap", Name: "list"}}
	})
	list := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "list", Namespace: c.ns}, Data: map[string]string{"values.yaml": "- a\n- b\n"}}
	if err := c.c.Create(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	src := &sourcev1.OCIRepository{ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: c.ns}}
	src.Spec.URL = "oci://example.com/charts/web"
	src.Spec.Interval = &metav1.Duration{Duration: time.Minute}
	if err := c.c.Create(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	badValues := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(badValues, []byte("a: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noAccess := writeKubeconfig(t, c.cfg, "nobody")
	getOnly := c.userWhoCanOnlyReadHelmReleases(t)
	chart := chartDir(t, "1.0.0")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"chart does not load", []string{"web", "--chart", broken}, "plan: loading chart " + broken + ": "},
		{"values file does not parse", []string{"web", "--chart", chart, "-f", badValues}, "plan: reading values file " + badValues},
		{"valuesFrom does not resolve", []string{"badvalues", "--chart", chart}, "plan: composing the values: could not resolve ConfigMap chart values reference '" + c.ns + "/missing' with key 'values.yaml': configmaps \"missing\" not found"},
		{"values do not merge", []string{"notamap", "--chart", chart}, "plan: composing the values: "},
		{"no access", []string{"web", "--chart", chart, "--kubeconfig", noAccess}, `User "nobody" cannot get resource "helmreleases" in API group "helm.toolkit.fluxcd.io"`},
		{"no right to read Helm storage", []string{"web", "--chart", chart, "--kubeconfig", getOnly}, `cannot list resource "secrets"`},
		{"source not ready", []string{"web"}, "plan: source OCIRepository " + c.ns + "/charts is not ready: no artifact"},
		{"no such HelmRelease", []string{"missing", "--chart", chart}, "plan: HelmRelease " + c.ns + "/missing not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-n", c.ns, "--kubeconfig", c.kubeconfig}, tt.args...)
			code, out, errOut := run(t, args...)
			if code != ExitError {
				t.Errorf("exit %d, want %d", code, ExitError)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tt.want) {
				t.Errorf("stderr %q, want one line with %q", errOut, tt.want)
			}
			t.Logf("%s", strings.TrimSpace(errOut))
		})
	}
}

// userWhoCanOnlyReadHelmReleases is a kubeconfig of a user allowed to get
// HelmReleases and ConfigMaps in the namespace, and nothing else.
func (c *cluster) userWhoCanOnlyReadHelmReleases(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: c.ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"helm.toolkit.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: c.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "reader", APIGroup: "rbac.authorization.k8s.io"}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return writeKubeconfig(t, c.cfg, "reader")
}

// --help prints the usage and the flags and exits 0.
func TestPlanCommandHelp(t *testing.T) {
	code, out, errOut := run(t, "--help")
	if code != ExitNoChange || errOut != "" || !strings.Contains(out, usageLine) || !strings.Contains(out, "--source-host") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}
