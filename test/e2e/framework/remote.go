package framework

import (
	"context"
	"os"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/cluster"
)

// Remote is a second cluster that HelmReleases of the test cluster deploy
// to through spec.kubeConfig. A test that wants to break the way there
// puts a proxy in front of it (StartProxyTo(t, r.Cluster.RESTConfig()))
// and gives the HelmRelease the proxy's kubeconfig (KubeconfigSecret).
type Remote struct {
	Cluster *cluster.Cluster
	// Client reaches the remote cluster directly, with admin rights.
	Client client.Client
}

// StartRemote starts a throwaway single-node cluster named name beside the
// shared one, stopped when t ends.
func (e *Env) StartRemote(t testing.TB, name string) *Remote {
	t.Helper()
	c, cl := e.StartCluster(t, cluster.Options{Name: name, Nodes: 1})
	return &Remote{Cluster: c, Client: cl}
}

// Namespace creates namespace ns on the remote cluster.
func (r *Remote) Namespace(t testing.TB, ns string) {
	t.Helper()
	if err := r.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("creating namespace %s on the remote cluster: %v", ns, err)
	}
}

// KubeconfigSecret creates the Secret ns/name in the test cluster with the
// kubeconfig file at path (a cluster's, or a proxy's Kubeconfig) under the
// key "value", the one spec.kubeConfig reads by default.
func (e *Env) KubeconfigSecret(t testing.TB, ns, name, path string) {
	t.Helper()
	kubeconfig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"value": kubeconfig}})
}

// Targeting points hr at the cluster of the kubeconfig Secret secret (in
// hr's namespace) and returns it.
func Targeting(hr *v2.HelmRelease, secret string) *v2.HelmRelease {
	hr.Spec.KubeConfig = &meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: secret}}
	return hr
}
