package plancmd

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A release that applies as a tenant's ServiceAccount is planned as that
// account, as the controller reconciles it: the plan sees no more than
// the controller would. The plan's own identity (here cluster-admin,
// which may impersonate) reads the HelmRelease and its values.
func TestPlanCommandAsTheReleasesServiceAccount(t *testing.T) {
	c := newCluster(t)
	chart := chartDir(t, "1.0.0")
	obj := c.createHR(t, "web", nil)
	installWeb(t, c, obj, chart)
	if err := c.c.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, account string
		rules         []rbacv1.PolicyRule
		want          string
		code          int
	}{
		{"an account that may not read Helm storage: refused, as the controller would be", "reader", []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}},
		}, `User "system:serviceaccount:` + c.ns + `:reader" cannot list resource "secrets"`, ExitError},
		{"an account that may manage the namespace: planned", "owner", []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		}, "next step: upgrade", ExitChanges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.bindServiceAccount(t, tc.account, tc.rules)
			file := writeHR(t, "  interval: 1m\n  serviceAccountName: "+tc.account+"\n")
			code, out, errOut := run(t, "-n", c.ns, "--file", file, "--chart", chart, "--kubeconfig", c.kubeconfig)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d (want %d), want %q; stderr %q:\n%s", code, tc.code, tc.want, errOut, out)
			}
		})
	}
}

// bindServiceAccount gives the ServiceAccount account in c's namespace the
// rules there (the account object itself is not needed to impersonate it).
func (c *cluster) bindServiceAccount(t *testing.T, account string, rules []rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: c.ns}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: account, Namespace: c.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: c.ns}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}
