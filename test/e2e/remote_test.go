package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestRemoteCluster deploys podinfo from a HelmRelease in the e2e cluster
// into a second cluster through spec.kubeConfig.secretRef, with the shared
// e2e controller:
//
//   - the release's objects and its Helm storage are on the remote cluster,
//     none on the controller's; the chart source stays on the controller's;
//   - the inventory lists the remote objects;
//   - a missing kubeconfig Secret gives Ready=False with the reason; a
//     kubeconfig with an exec plugin beside a client certificate works
//     without the plugin, as upstream's, and the HelmRelease deletes cleanly;
//   - deleting the HelmRelease uninstalls from the remote cluster;
//   - with the kubeconfig Secret gone, deleting skips the uninstall (as
//     upstream) and leaves the remote objects.
func TestRemoteCluster(t *testing.T) {
	t.Parallel()
	remote := env.StartRemote(t, "remote")
	remoteClient := remote.Client
	ns := env.Namespace(t)
	remote.Namespace(t, ns)
	kubeconfig, err := os.ReadFile(remote.Cluster.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	repo := env.HelmRepository(t, ns)
	for _, name := range []string{"remote", "orphan"} {
		env.KubeconfigSecret(t, ns, name+"-kubeconfig", remote.Cluster.Kubeconfig())
	}

	hr := framework.Targeting(env.PodinfoRelease(ns, "podinfo-remote", repo.Name, ""), "remote-kubeconfig")
	orphan := framework.Targeting(env.PodinfoRelease(ns, "podinfo-orphan", repo.Name, ""), "orphan-kubeconfig")
	env.Create(t, hr)
	env.Create(t, orphan)

	t.Run("bad kubeconfigs", func(t *testing.T) {
		bad := framework.Targeting(env.PodinfoRelease(ns, "podinfo-bad-kubeconfig", repo.Name, ""), "not-there")
		env.Create(t, bad)
		env.WaitNotReady(t, bad, "RESTClientError", "could not get kubeconfig Secret '"+ns+"/not-there'")
		env.WaitEvent(t, ns, bad.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: "RESTClientError",
			Contains: "not-there",
		})

		withExec := strings.Replace(string(kubeconfig), "    client-certificate-data:",
			"    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true\n      interactiveMode: Never\n    client-certificate-data:", 1)
		if withExec == string(kubeconfig) {
			t.Fatalf("the remote kubeconfig has no client-certificate-data to put an exec plugin beside:\n%s", kubeconfig)
		}
		env.Create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exec-kubeconfig"},
			Data: map[string][]byte{"value.yaml": []byte(withExec)}})
		// As upstream: without --insecure-kubeconfig-exec the plugin is
		// left out and the rest of the kubeconfig (its client
		// certificate) reaches the cluster.
		env.PatchSpec(t, bad, func(o *v2.HelmRelease) { o.Spec.KubeConfig.SecretRef.Name = "exec-kubeconfig" })
		env.WaitRelease(t, bad, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 5 * time.Minute})
		if n := remoteReleaseSecrets(t, remoteClient, ns, bad.Name); n != 1 {
			t.Errorf("%d Helm storage Secrets of %s on the remote cluster, want 1", n, bad.Name)
		}

		if err := env.Client.Delete(context.Background(), bad); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, time.Minute, "HelmRelease with a bad kubeconfig deleted", func(ctx context.Context) error { return env.Gone(ctx, bad) })
	})

	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 5 * time.Minute})
	env.WaitRelease(t, orphan, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 5 * time.Minute})

	t.Run("objects on the remote cluster only", func(t *testing.T) {
		ctx := context.Background()
		d := &appsv1.Deployment{}
		if err := remoteClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: hr.Name}, d); err != nil {
			t.Fatalf("Deployment on the remote cluster: %v", err)
		}
		if d.Status.ReadyReplicas < 1 {
			t.Errorf("remote Deployment has %d ready replicas after Ready", d.Status.ReadyReplicas)
		}
		if err := env.Get(ctx, &appsv1.Deployment{}, ns, hr.Name); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment on the controller's cluster: err = %v, want NotFound", err)
		}
		if n := remoteReleaseSecrets(t, remoteClient, ns, hr.Name); n != 1 {
			t.Errorf("%d Helm storage Secrets on the remote cluster, want 1", n)
		}
		if n := len(env.Storage(t, ns, hr.Name)); n != 0 {
			t.Errorf("%d Helm storage Secrets on the controller's cluster, want 0", n)
		}
		// The chart comes from the controller's cluster.
		if err := env.Get(ctx, &sourcev1.HelmChart{}, ns, ns+"-"+hr.Name); err != nil {
			t.Errorf("HelmChart on the controller's cluster: %v", err)
		}
		if err := remoteClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-" + hr.Name}, &sourcev1.HelmChart{}); err == nil {
			t.Errorf("a HelmChart was created on the remote cluster")
		}
		framework.WantInventory(t, hr, fmt.Sprintf("%s_%s_apps_Deployment", ns, hr.Name), fmt.Sprintf("%s_%s__Service", ns, hr.Name))
		if hr.Status.StorageNamespace != ns {
			t.Errorf("storageNamespace %q, want %q", hr.Status.StorageNamespace, ns)
		}
	})

	t.Run("deleting uninstalls from the remote cluster", func(t *testing.T) {
		if err := env.Client.Delete(context.Background(), hr); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, 2*time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
		ctx := context.Background()
		err := remoteClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: hr.Name}, &appsv1.Deployment{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("remote Deployment after the uninstall: err = %v, want NotFound", err)
		}
		if n := remoteReleaseSecrets(t, remoteClient, ns, hr.Name); n != 0 {
			t.Errorf("%d Helm storage Secrets left on the remote cluster", n)
		}
	})

	t.Run("deleting without the kubeconfig leaves the remote release", func(t *testing.T) {
		ctx := context.Background()
		if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan-kubeconfig"}}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, orphan); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, time.Minute, "HelmRelease gone without its kubeconfig", func(ctx context.Context) error { return env.Gone(ctx, orphan) })
		if err := remoteClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: orphan.Name}, &appsv1.Deployment{}); err != nil {
			t.Errorf("remote Deployment of the orphaned release: %v (want it left in place)", err)
		}
	})
}

// remoteReleaseSecrets counts the Helm storage Secrets of release in ns on
// the cluster c reaches.
func remoteReleaseSecrets(t *testing.T, c client.Client, ns, release string) int {
	t.Helper()
	stored, err := env.ReadStorage(context.Background(), c, ns, release)
	if err != nil {
		t.Fatal(err)
	}
	return len(stored)
}
