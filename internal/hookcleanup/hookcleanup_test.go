package hookcleanup

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestJudge(t *testing.T) {
	const ours = "apps/web"
	hook := map[string]string{"helm.sh/hook": "post-install"}
	with := func(base map[string]string, kv ...string) *metav1.ObjectMeta {
		a := map[string]string{}
		for k, v := range base {
			a[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return &metav1.ObjectMeta{Annotations: a}
	}
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	tests := []struct {
		name     string
		gk       schema.GroupKind
		live     *metav1.ObjectMeta
		recorded *metav1.ObjectMeta
		// want is "" for a deletion, else a part of the reason.
		want string
	}{
		{name: "this release's hook", gk: job, live: with(hook, OriginAnnotation, ours)},
		{name: "cluster-scoped, marked as ours", gk: schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}, live: with(hook, OriginAnnotation, ours)},
		{name: "another release of the same name", gk: job, live: with(hook, OriginAnnotation, "other/web"), want: "created by the hooks of release other/web"},
		{name: "no mark", gk: job, live: with(hook), want: "no " + OriginAnnotation},
		{name: "not a hook", gk: job, live: with(nil, OriginAnnotation, ours), want: "not a hook object"},
		{name: "keep on the object", gk: job, live: with(hook, OriginAnnotation, ours, "helm.sh/resource-policy", " Keep"), want: "resource-policy: keep"},
		{name: "keep in the chart", gk: job, live: with(hook, OriginAnnotation, ours), recorded: with(hook, "helm.sh/resource-policy", "keep"), want: "resource-policy: keep"},
		{name: "Namespace", gk: schema.GroupKind{Kind: "Namespace"}, live: with(hook, OriginAnnotation, ours), want: "a Namespace is never deleted"},
		{name: "PersistentVolumeClaim", gk: schema.GroupKind{Kind: "PersistentVolumeClaim"}, live: with(hook, OriginAnnotation, ours), want: "never deleted"},
		{name: "PersistentVolume", gk: schema.GroupKind{Kind: "PersistentVolume"}, live: with(hook, OriginAnnotation, ours), want: "never deleted"},
		{name: "CustomResourceDefinition", gk: schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, live: with(hook, OriginAnnotation, ours), want: "never deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recorded metav1.Object
			if tt.recorded != nil {
				recorded = tt.recorded
			}
			got := Judge(tt.gk, tt.live, recorded, ours)
			if tt.want == "" && got != "" {
				t.Fatalf("Judge = %q, want a deletion", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("Judge = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestStamp(t *testing.T) {
	obj := &metav1.ObjectMeta{}
	Stamp(obj, Origin("flux-system", "web"))
	if got := obj.Annotations[OriginAnnotation]; got != "flux-system/web" {
		t.Fatalf("mark %q, want flux-system/web", got)
	}
	obj = &metav1.ObjectMeta{Annotations: map[string]string{"helm.sh/hook": "test"}}
	Stamp(obj, "a/b")
	if obj.Annotations["helm.sh/hook"] != "test" || obj.Annotations[OriginAnnotation] != "a/b" {
		t.Fatalf("annotations %v", obj.Annotations)
	}
}

func TestPending(t *testing.T) {
	rel := func(status common.Status, desc string) *releasev1.Release {
		return &releasev1.Release{Info: &releasev1.Info{Status: status, Description: desc}}
	}
	tests := []struct {
		name string
		rel  *releasev1.Release
		want bool
	}{
		{name: "cleanup pending", rel: rel(common.StatusUninstalled, PendingDescription), want: true},
		{name: "uninstalled, kept history", rel: rel(common.StatusUninstalled, CompletedDescription)},
		{name: "still uninstalling", rel: rel(common.StatusUninstalling, PendingDescription)},
		{name: "deployed", rel: rel(common.StatusDeployed, "Install complete")},
		{name: "no info", rel: &releasev1.Release{}},
		{name: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Pending(tt.rel); got != tt.want {
				t.Fatalf("Pending = %t, want %t", got, tt.want)
			}
		})
	}
}
