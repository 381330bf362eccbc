package hookcleanup

import (
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestJudge(t *testing.T) {
	const ours = "apps/web"
	hook := map[string]string{"helm.sh/hook": "post-install"}
	// with is an object without status (one that has no run to finish,
	// or a finished one for kinds that have) with the annotations.
	with := func(base map[string]string, kv ...string) *unstructured.Unstructured {
		a := map[string]string{}
		for k, v := range base {
			a[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetAnnotations(a)
		return u
	}
	finished := func(gk schema.GroupKind, u *unstructured.Unstructured) *unstructured.Unstructured {
		switch gk.Kind {
		case "Job":
			u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}
		case "Pod":
			u.Object["status"] = map[string]any{"phase": "Succeeded"}
		}
		return u
	}
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	secret := schema.GroupKind{Kind: "Secret"}
	cert := schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	tests := []struct {
		name     string
		gk       schema.GroupKind
		live     *unstructured.Unstructured
		recorded *unstructured.Unstructured
		// listed is spec.uninstall.deleteHookResourceKinds.
		listed []string
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
		{name: "a Pod", gk: schema.GroupKind{Kind: "Pod"}, live: with(hook, OriginAnnotation, ours)},
		{name: "a ServiceAccount", gk: schema.GroupKind{Kind: "ServiceAccount"}, live: with(hook, OriginAnnotation, ours)},
		{name: "a RoleBinding", gk: schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}, live: with(hook, OriginAnnotation, ours)},
		{name: "a Secret, by default", gk: secret, live: with(hook, OriginAnnotation, ours),
			want: "a Secret may hold data: deleted only when spec.uninstall.deleteHookResourceKinds lists Secret"},
		{name: "a Secret, listed", gk: secret, live: with(hook, OriginAnnotation, ours), listed: []string{"Secret"}},
		{name: "a ConfigMap, another kind listed", gk: schema.GroupKind{Kind: "ConfigMap"}, live: with(hook, OriginAnnotation, ours), listed: []string{"Secret"},
			want: "lists ConfigMap"},
		{name: "a custom resource, by default", gk: cert, live: with(hook, OriginAnnotation, ours), want: "lists Certificate.cert-manager.io"},
		{name: "a custom resource, listed", gk: cert, live: with(hook, OriginAnnotation, ours), listed: []string{" Certificate.cert-manager.io "}},
		{name: "a custom resource, its Kind listed without its group", gk: cert, live: with(hook, OriginAnnotation, ours), listed: []string{"Certificate"},
			want: "lists Certificate.cert-manager.io"},
		{name: "every kind", gk: cert, live: with(hook, OriginAnnotation, ours), listed: []string{"*"}},
		{name: "every kind, still not another release's", gk: secret, live: with(hook, OriginAnnotation, "other/web"), listed: []string{"*"}, want: "created by the hooks"},
		{name: "every kind, still keep", gk: secret, live: with(hook, OriginAnnotation, ours, "helm.sh/resource-policy", "keep"), listed: []string{"*"}, want: "resource-policy: keep"},
		{name: "a PersistentVolumeClaim listed, still never", gk: schema.GroupKind{Kind: "PersistentVolumeClaim"}, live: with(hook, OriginAnnotation, ours),
			listed: []string{"*", "PersistentVolumeClaim"}, want: "never deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var recorded metav1.Object
			if tt.recorded != nil {
				recorded = tt.recorded
			}
			kinds, err := ParseKinds(tt.listed)
			if err != nil {
				t.Fatal(err)
			}
			got := Judge(tt.gk, finished(tt.gk, tt.live), recorded, ours, kinds)
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

func TestParseKinds(t *testing.T) {
	for _, bad := range []string{"", "  ", ".apps", "apps/v1", "Secret Map"} {
		if _, err := ParseKinds([]string{"Secret", bad}); err == nil || !strings.Contains(err.Error(), KindsField+"[1]") {
			t.Errorf("ParseKinds(%q) = %v, want an error naming the entry", bad, err)
		}
	}
	want := []string{"ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io",
		"Job.batch", "Pod", "Role.rbac.authorization.k8s.io", "RoleBinding.rbac.authorization.k8s.io", "ServiceAccount"}
	if got := DefaultKinds(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("DefaultKinds = %v, want %v", got, want)
	}
}

// A hook Job or Pod that has not finished its run is left, whatever else
// would let it go: deleting it would stop it halfway (a Job's pods go with
// it). Objects of other kinds have no run to finish and are judged as
// before, whatever their status says.
func TestJudgeLeavesUnfinishedHooks(t *testing.T) {
	const ours = "apps/web"
	job := schema.GroupKind{Group: "batch", Kind: "Job"}
	pod := schema.GroupKind{Kind: "Pod"}
	// live is a hook object of this release with status (none when nil).
	live := func(status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "web-hook"}}}
		u.SetAnnotations(map[string]string{"helm.sh/hook": "post-install", OriginAnnotation: ours})
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	condition := func(kind, status string) any { return map[string]any{"type": kind, "status": status} }
	conditions := func(c ...any) map[string]any { return map[string]any{"conditions": c} }
	tests := []struct {
		name string
		gk   schema.GroupKind
		live *unstructured.Unstructured
		// want is "" for a deletion, else a part of the reason.
		want string
	}{
		{name: "a Job running", gk: job, live: live(map[string]any{"active": int64(1)}),
			want: "a Job that is still running (1 active pods): deleting it would stop it halfway"},
		{name: "a Job not started yet", gk: job, live: live(nil), want: "a Job that has not finished (neither Complete nor Failed)"},
		{name: "a Job whose success is known but not yet Complete", gk: job, live: live(conditions(condition("SuccessCriteriaMet", "True"))),
			want: "has not finished"},
		{name: "a Job Complete", gk: job, live: live(conditions(condition("SuccessCriteriaMet", "True"), condition("Complete", "True")))},
		{name: "a Job Failed", gk: job, live: live(conditions(condition("FailureTarget", "True"), condition("Failed", "True")))},
		{name: "a Job Complete=False", gk: job, live: live(conditions(condition("Complete", "False"))), want: "has not finished"},
		{name: "a Job Failed, its pods still active", gk: job, live: live(map[string]any{"active": int64(2), "conditions": []any{condition("Failed", "True")}}),
			want: "still running (2 active pods)"},
		{name: "a Pod running", gk: pod, live: live(map[string]any{"phase": "Running"}), want: "a Pod that has not finished (phase Running): deleting it would stop it halfway"},
		{name: "a Pod pending", gk: pod, live: live(map[string]any{"phase": "Pending"}), want: "(phase Pending)"},
		{name: "a Pod without a phase", gk: pod, live: live(nil), want: "a Pod that has not finished (no phase yet)"},
		{name: "a Pod succeeded", gk: pod, live: live(map[string]any{"phase": "Succeeded"})},
		{name: "a Pod failed", gk: pod, live: live(map[string]any{"phase": "Failed"})},
		{name: "a ServiceAccount, whatever its status", gk: schema.GroupKind{Kind: "ServiceAccount"}, live: live(map[string]any{"active": int64(1), "phase": "Running"})},
		{name: "a Job of another group", gk: schema.GroupKind{Group: "example.com", Kind: "Job"}, live: live(map[string]any{"active": int64(1)})},
		{name: "another release's running Job: the mark says why", gk: job,
			live: func() *unstructured.Unstructured {
				u := live(map[string]any{"active": int64(1)})
				u.SetAnnotations(map[string]string{"helm.sh/hook": "post-install", OriginAnnotation: "other/web"})
				return u
			}(),
			want: "created by the hooks of release other/web"},
	}
	kinds, err := ParseKinds([]string{AllKinds})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Judge(tt.gk, tt.live, nil, ours, kinds)
			if tt.want == "" && got != "" {
				t.Fatalf("Judge = %q, want a deletion", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("Judge = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}
