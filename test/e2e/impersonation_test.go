package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestImpersonation runs releases as ServiceAccounts of their namespace:
//
//   - "restricted" may manage Secrets (Helm's storage) but not write
//     Services or Deployments: installing podinfo as it fails with
//     Ready=False naming the forbidden request (server-side apply: patch),
//     and nothing of the chart is created;
//   - "deployer" may do anything in the namespace: podinfo installs, also
//     with spec.persistentClient false (fresh discovery per Helm step);
//   - a controller started with --default-service-account=restricted (its
//     own shard) runs a HelmRelease that names no account as "restricted",
//     and one naming "deployer" as "deployer".
func TestImpersonation(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	// Reading and deleting podinfo's objects lets Helm get as far as
	// applying them, and lets the failed release be uninstalled when the
	// test deletes it; applying them is what is forbidden.
	env.ServiceAccount(t, ns, "restricted",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "delete"}})
	env.ServiceAccount(t, ns, "deployer", rbacv1.PolicyRule{
		APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})

	t.Run("forbidden by RBAC", func(t *testing.T) {
		hr := env.PodinfoRelease(ns, "podinfo-restricted", repo.Name, "")
		hr.Spec.ServiceAccountName = "restricted"
		env.Create(t, hr)
		impersonationWantForbidden(t, hr, "restricted")
	})

	t.Run("missing service account", func(t *testing.T) {
		// Nothing can be read as an account that does not exist, not even
		// Helm storage: the release was never installed and must not look
		// Ready (it once read "release … is in sync").
		hr := env.PodinfoRelease(ns, "podinfo-nobody", repo.Name, "")
		hr.Spec.ServiceAccountName = "nobody"
		env.Create(t, hr)
		user := fmt.Sprintf("system:serviceaccount:%s:nobody", ns)
		env.WaitNotReady(t, hr, "StateError", fmt.Sprintf("secrets is forbidden: User %q cannot list resource", user))
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: "StateError",
			Contains: user,
		})
		env.Consistently(t, 3*time.Second, "the release stays not Ready", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if conditions.IsTrue(hr, meta.ReadyCondition) {
				return fmt.Errorf("Ready=True (%s: %s) for a release that was never installed",
					conditions.GetReason(hr, meta.ReadyCondition), conditions.GetMessage(hr, meta.ReadyCondition))
			}
			return nil
		})
	})

	t.Run("allowed by RBAC", func(t *testing.T) {
		hr := env.PodinfoRelease(ns, "podinfo-deployer", repo.Name, "")
		hr.Spec.ServiceAccountName = "deployer"
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 5 * time.Minute})
		env.WantDeploymentReplicas(t, ns, hr.Name, 1)
		framework.WantInventory(t, hr, fmt.Sprintf("%s_%s_apps_Deployment", ns, hr.Name))
	})

	t.Run("fresh client per action", func(t *testing.T) {
		hr := env.PodinfoRelease(ns, "podinfo-fresh-client", repo.Name, "")
		hr.Spec.ServiceAccountName = "deployer"
		hr.Spec.PersistentClient = ptr.To(false)
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 5 * time.Minute})
		env.WantDeploymentReplicas(t, ns, hr.Name, 1)
	})

	t.Run("default service account", func(t *testing.T) {
		ctl := env.StartShard(t, ns, framework.ControllerOptions{
			Shard: "impersonation-" + rand.String(8),
			Args:  []string{"--default-service-account=restricted"},
		})
		framework.EnsureRunning(t, ctl)

		defaulted := framework.Sharded(env.PodinfoRelease(ns, "podinfo-defaulted", repo.Name, ""), ctl)
		env.Create(t, defaulted)
		impersonationWantForbidden(t, defaulted, "restricted")

		explicit := framework.Sharded(env.PodinfoRelease(ns, "podinfo-explicit", repo.Name, ""), ctl)
		explicit.Spec.ServiceAccountName = "deployer"
		env.Create(t, explicit)
		env.WaitRelease(t, explicit, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 5 * time.Minute})
		env.WantDeploymentReplicas(t, ns, explicit.Name, 1)
		framework.MustRun(t, ctl)
	})
}

// impersonationWantForbidden waits for the install to fail on RBAC as the
// account, and checks none of the chart's objects exist.
func impersonationWantForbidden(t *testing.T, hr *v2.HelmRelease, account string) {
	t.Helper()
	user := fmt.Sprintf("system:serviceaccount:%s:%s", hr.Namespace, account)
	env.WaitNotReady(t, hr, helmv2.InstallFailedReason, fmt.Sprintf("is forbidden: User %q cannot patch resource", user))
	t.Logf("Ready=False: %s", conditions.GetMessage(hr, meta.ReadyCondition))
	env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{
		Type: corev1.EventTypeWarning, Reason: helmv2.InstallFailedReason,
		Contains: user,
	})
	ctx := context.Background()
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}} {
		if err := env.Get(ctx, obj, hr.Namespace, hr.Name); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s after the forbidden install: err = %v, want NotFound", obj, hr.Name, err)
		}
	}
}
