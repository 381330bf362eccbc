package recreate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const rolledBackFrom = `---
# Source: shop/templates/job.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    helm.toolkit.fluxcd.io/force: enabled
---
# Source: shop/templates/other.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: seed
  namespace: elsewhere
  annotations:
    helm.toolkit.fluxcd.io/force: enabled
---
# Source: shop/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    helm.toolkit.fluxcd.io/force: disabled
---
# Source: shop/templates/broken.yaml
kind: [not an object
`

func TestConsentsOf(t *testing.T) {
	consents := ConsentsOf(rolledBackFrom)
	tests := []struct {
		name      string
		kind      string
		namespace string
		objName   string
		want      bool
	}{
		{name: "no namespace in the manifest: the release's", kind: "Job", namespace: "shop", objName: "migrate", want: true},
		{name: "no namespace in the manifest: not another namespace", kind: "Job", namespace: "other", objName: "migrate"},
		{name: "namespace in the manifest", kind: "Job", namespace: "elsewhere", objName: "seed", want: true},
		{name: "namespace in the manifest: not the release's", kind: "Job", namespace: "shop", objName: "seed"},
		{name: "disabled is no consent", kind: "ConfigMap", namespace: "shop", objName: "settings"},
		{name: "another kind of the same name", kind: "ConfigMap", namespace: "shop", objName: "migrate"},
		{name: "not in the manifest", kind: "Job", namespace: "shop", objName: "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gk := jobKind
			if tt.kind == "ConfigMap" {
				gk = cmKind
			}
			desired := object(gk, "", nil)
			desired.SetNamespace(tt.namespace)
			desired.SetName(tt.objName)
			if got := consents.has(Refused{Kind: gk, Desired: desired}, "shop"); got != tt.want {
				t.Errorf("has = %v, want %v", got, tt.want)
			}
		})
	}
	if len(consents) != 2 {
		t.Errorf("consents = %v, want the two enabled Jobs", consents)
	}
}

// A rollback may recreate what the revision it rolls back from consented
// to, unless the manifest it applies opts out; every guard still applies.
func TestRecreateRolledBackFrom(t *testing.T) {
	consents := ConsentsOf(rolledBackFrom)
	tests := []struct {
		name    string
		policy  Policy
		desired map[string]string
		live    *unstructured.Unstructured
		wantErr string
	}{
		{name: "consent of the revision rolled back from", policy: Policy{RolledBackFrom: consents, Release: Release{Name: "shop", Namespace: "shop"}},
			live: object(jobKind, "a", nil)},
		{name: "without it: refused", policy: Policy{Release: Release{Name: "shop", Namespace: "shop"}},
			live: object(jobKind, "a", nil), wantErr: "annotate it helm.toolkit.fluxcd.io/force: enabled"},
		{name: "the manifest applied opts out", policy: Policy{RolledBackFrom: consents},
			desired: map[string]string{Annotation: Disabled}, live: object(jobKind, "a", nil), wantErr: "it opts out of recreation"},
		{name: "guards still apply: running Job", policy: Policy{RolledBackFrom: consents},
			live: setJobStatus(object(jobKind, "a", nil), 1, ""), wantErr: "still running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cluster := &fakeObject{live: tt.live, dryRunErr: alreadyThere}
			r := Refused{Object: "Job/shop/migrate", Kind: jobKind, Desired: object(jobKind, "", tt.desired), Cause: templateRefusal,
				Cluster: cluster, Dependents: &fakeDependents{}}
			_, err := tt.policy.Recreate(context.Background(), r, func(context.Context) error { return nil })
			if tt.wantErr == "" {
				if err != nil || len(cluster.deleted) != 1 {
					t.Fatalf("Recreate = %v (deleted %v), want recreated", err, cluster.deleted)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || len(cluster.deleted) > 0 {
				t.Fatalf("Recreate = %v (deleted %v), want refused with %q", err, cluster.deleted, tt.wantErr)
			}
		})
	}
}

func TestConsentsOfNothing(t *testing.T) {
	for _, manifest := range []string{"", "---\n", "---\n# Source: x\nkind: ConfigMap\nmetadata:\n  annotations:\n    helm.toolkit.fluxcd.io/force: enabled\n"} {
		if got := ConsentsOf(manifest); len(got) != 0 {
			t.Errorf("ConsentsOf(%q) = %v, want none (no object named)", manifest, got)
		}
	}
	if (Consents{}).has(Refused{Kind: jobKind}, "shop") {
		t.Error("a refusal without a manifest has consent")
	}
}

// Consents print as the sorted names of the objects consented to, so a
// plan that carries them can be shown; none print as an empty list.
func TestConsentsPrint(t *testing.T) {
	tests := []struct {
		name     string
		manifest string
		want     string
	}{
		{name: "a manifest with consents", manifest: rolledBackFrom, want: `["Job.batch/elsewhere/seed","Job.batch/migrate"]`},
		{name: "a core kind", manifest: "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  annotations:\n    helm.toolkit.fluxcd.io/force: enabled\n",
			want: `["Service/web"]`},
		{name: "no consent", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n", want: `[]`},
		{name: "no manifest", want: `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(ConsentsOf(tt.manifest))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("printed %s, want %s", got, tt.want)
			}
		})
	}
}
