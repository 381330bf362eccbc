package connect

import "testing"

func TestImpersonation(t *testing.T) {
	cases := []struct {
		name, spec, dflt, namespace string
		wantAccount, wantUser       string
	}{
		{name: "none", namespace: "apps"},
		{name: "spec", spec: "deployer", namespace: "apps", wantAccount: "deployer", wantUser: "system:serviceaccount:apps:deployer"},
		{name: "default when the spec sets none", dflt: "default", namespace: "team-a", wantAccount: "default", wantUser: "system:serviceaccount:team-a:default"},
		{name: "spec wins over the default", spec: "deployer", dflt: "default", namespace: "apps", wantAccount: "deployer", wantUser: "system:serviceaccount:apps:deployer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ImpersonatedServiceAccount(tc.spec, tc.dflt)
			if got != tc.wantAccount {
				t.Fatalf("account %q, want %q", got, tc.wantAccount)
			}
			if got == "" {
				return
			}
			if user := ServiceAccountUsername(tc.namespace, got); user != tc.wantUser {
				t.Errorf("user %q, want %q", user, tc.wantUser)
			}
		})
	}
}
