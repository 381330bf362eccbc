package action

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// hookManifest is a manifest of kind (ConfigMap, ServiceAccount, Job...)
// named name with the annotations; namespace may be empty. Jobs get a
// template the API server accepts.
func hookManifest(kind, namespace, name string, annotations map[string]string) string {
	obj := map[string]any{
		"kind":     kind,
		"metadata": map[string]any{"name": name, "annotations": annotations},
	}
	switch kind {
	case "Job":
		obj["apiVersion"] = "batch/v1"
		obj["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never",
			"containers":    []any{map[string]any{"name": "run", "image": "example.com/run:1"}},
		}}}
	case "CustomResourceDefinition":
		obj["apiVersion"] = "apiextensions.k8s.io/v1"
	default:
		obj["apiVersion"] = "v1"
	}
	if namespace != "" {
		obj["metadata"].(map[string]any)["namespace"] = namespace
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		panic(err) // test data only
	}
	return string(out)
}

// hookLeftoversChart has a ConfigMap of its own and hooks of every kind an
// uninstall leaves behind; other is the namespace of one of them. A hook
// named after the value rev is a different object in each revision.
func hookLeftoversChart(other string) *chartv2.Chart {
	hook := func(event string, extra ...string) map[string]string {
		a := map[string]string{"helm.sh/hook": event}
		for i := 0; i+1 < len(extra); i += 2 {
			a[extra[i]] = extra[i+1]
		}
		return a
	}
	files := map[string]string{
		"cm.yaml":           configMapTemplate,
		"post-install.yaml": hookManifest("ServiceAccount", "", "{{ .Release.Name }}-post-install", hook("post-install")),
		"pre-install.yaml":  hookManifest("ConfigMap", "", "{{ .Release.Name }}-pre-install", hook("pre-install")),
		"pre-upgrade.yaml":  hookManifest("ConfigMap", "", "{{ .Release.Name }}-pre-upgrade", hook("pre-upgrade")),
		"versioned.yaml":    hookManifest("ConfigMap", "", "{{ .Release.Name }}-versioned-{{ .Values.rev }}", hook("post-install,post-upgrade")),
		"keep.yaml":         hookManifest("ConfigMap", "", "{{ .Release.Name }}-keep", hook("pre-install", "helm.sh/resource-policy", "keep")),
		"succeeded.yaml":    hookManifest("ConfigMap", "", "{{ .Release.Name }}-succeeded", hook("post-install", "helm.sh/hook-delete-policy", "hook-succeeded")),
		"pre-delete.yaml":   hookManifest("ConfigMap", "", "{{ .Release.Name }}-pre-delete", hook("pre-delete")),
		"post-delete.yaml":  hookManifest("ServiceAccount", "", "{{ .Release.Name }}-post-delete", hook("post-delete")),
		"elsewhere.yaml":    hookManifest("ConfigMap", other, "{{ .Release.Name }}-elsewhere", hook("post-install")),
	}
	c := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "leftovers", Version: "1.0.0"},
		Values:   map[string]any{"foo": "x", "rev": "1"},
	}
	for name, data := range files {
		c.Templates = append(c.Templates, &common.File{Name: "templates/" + name, Data: []byte(data)})
	}
	return c
}

// TestAgainstAPIServerUninstallDeleteHookResources installs the leftovers
// chart, upgrades it and uninstalls it with and without
// deleteHookResources and keepHistory. Without the option Helm's behaviour
// is unchanged: every hook object without a delete policy stays, the pre-
// and post-delete hooks of the uninstall too. With it they are gone, from
// both revisions and from another namespace, while the hook the chart
// keeps and an object that only shares a hook's name stay.
func TestAgainstAPIServerUninstallDeleteHookResources(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		deleteHooks bool
		keepHistory bool
	}{
		{name: "helm-default"},
		{name: "helm-default-keep-history", keepHistory: true},
		{name: "delete-hooks", deleteHooks: true},
		{name: "delete-hooks-keep-history", deleteHooks: true, keepHistory: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, other := "leftovers-"+tt.name, "leftovers-"+tt.name+"-other"
			createNamespaces(t, cs, ns, other)
			obj := newHR(withTimeout(30*time.Second), func(o *v2.HelmRelease) {
				o.Name, o.Namespace = "hooks", ns
				o.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{KeepHistory: tt.keepHistory}, DeleteHookResources: tt.deleteHooks}
			})
			cfg, err := factory.Build(ns, ns, WithLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			chart := hookLeftoversChart(other)
			if _, err := Install(ctx, cfg, obj, chart, nil, Options{}); err != nil {
				t.Fatalf("install: %v", err)
			}
			if _, err := Upgrade(ctx, cfg, obj, chart, map[string]any{"rev": "2"}, Options{}); err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			// Helm deleted the hook-succeeded ConfigMap; one of the same
			// name that is no hook must survive any cleanup.
			mustCreateConfigMap(t, cs, ns, "hooks-succeeded", nil)

			var heard []string
			opts := Options{HookResourcesDeleted: func(d []string) { heard = append(heard, d...) }}
			if _, err := Uninstall(ctx, cfg, obj, opts); err != nil {
				t.Fatalf("uninstall: %v", err)
			}

			leftovers := []string{
				"ServiceAccount/" + ns + "/hooks-post-install",
				"ConfigMap/" + ns + "/hooks-pre-install",
				"ConfigMap/" + ns + "/hooks-pre-upgrade",
				"ConfigMap/" + ns + "/hooks-versioned-1",
				"ConfigMap/" + ns + "/hooks-versioned-2",
				"ConfigMap/" + ns + "/hooks-pre-delete",
				"ServiceAccount/" + ns + "/hooks-post-delete",
				"ConfigMap/" + other + "/hooks-elsewhere",
			}
			always := []string{"ConfigMap/" + ns + "/hooks-keep", "ConfigMap/" + ns + "/hooks-succeeded"}
			for _, id := range leftovers {
				wantExists(t, cs, id, !tt.deleteHooks)
			}
			for _, id := range always {
				wantExists(t, cs, id, true)
			}
			wantExists(t, cs, "ConfigMap/"+ns+"/hooks-cm", false)

			var want []string
			if tt.deleteHooks {
				want = leftovers
			}
			slices.Sort(want)
			slices.Sort(heard)
			if !slices.Equal(heard, want) {
				t.Errorf("deleted objects reported:\n%v\nwant:\n%v", heard, want)
			}
			rels, err := History(cfg, "hooks")
			if err != nil {
				t.Fatal(err)
			}
			wantRecords := 0
			if tt.keepHistory {
				wantRecords = 2
			}
			if len(rels) != wantRecords {
				t.Errorf("%d release records after the uninstall, want %d", len(rels), wantRecords)
			}
		})
	}
}

// TestAgainstAPIServerHookCleanupObjects runs the cleanup on single hook
// records and the objects found under their names.
func TestAgainstAPIServerHookCleanupObjects(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	hookOnly := map[string]string{"helm.sh/hook": "post-install"}
	keepHook := map[string]string{"helm.sh/hook": "post-install", "helm.sh/resource-policy": " Keep "}
	crdName := "gadgets.cleanup.example.com"

	tests := []struct {
		name string
		// recorded are the hook manifests of the release records.
		recorded []string
		// live is the object in the cluster under the hook's name, as a
		// manifest; empty for none.
		live string
		// finalizer keeps the live object from going away.
		finalizer   bool
		wantDeleted []string
		// wantErr are substrings of the error; nil means none.
		wantErr []string
	}{
		{
			name:        "hook left without policy",
			recorded:    []string{hookManifest("ConfigMap", "", "left", hookOnly)},
			live:        hookManifest("ConfigMap", "", "left", hookOnly),
			wantDeleted: []string{"ConfigMap/%s/left"},
		},
		{
			name:        "job deleted in the background",
			recorded:    []string{hookManifest("Job", "", "migrate", hookOnly)},
			live:        hookManifest("Job", "", "migrate", hookOnly),
			wantDeleted: []string{"Job/%s/migrate"},
		},
		{
			name: "recorded by two revisions",
			recorded: []string{
				hookManifest("ConfigMap", "", "twice", hookOnly),
				hookManifest("ConfigMap", "", "twice", map[string]string{"helm.sh/hook": "post-install,post-upgrade"}),
			},
			live:        hookManifest("ConfigMap", "", "twice", hookOnly),
			wantDeleted: []string{"ConfigMap/%s/twice"},
		},
		{
			name:     "same name but not a hook",
			recorded: []string{hookManifest("ConfigMap", "", "plain", hookOnly)},
			live:     hookManifest("ConfigMap", "", "plain", nil),
		},
		{
			name:     "kept by the live object",
			recorded: []string{hookManifest("ConfigMap", "", "kept-live", hookOnly)},
			live:     hookManifest("ConfigMap", "", "kept-live", keepHook),
		},
		{
			name:     "kept by the chart",
			recorded: []string{hookManifest("ConfigMap", "", "kept-chart", keepHook)},
			live:     hookManifest("ConfigMap", "", "kept-chart", hookOnly),
		},
		{
			name:     "already gone",
			recorded: []string{hookManifest("ConfigMap", "", "gone", hookOnly)},
		},
		{
			name:     "CRDs are never deleted",
			recorded: []string{hookManifest("CustomResourceDefinition", "", crdName, hookOnly)},
			live: strings.Replace(crdYAML("gadgets", "Gadget", "cleanup.example.com", "1"),
				"metadata:\n", "metadata:\n  annotations:\n    helm.sh/hook: post-install\n", 1),
		},
		{
			name:     "kind no longer served",
			recorded: []string{"apiVersion: nowhere.example.com/v1\nkind: Gizmo\nmetadata:\n  name: g\n"},
		},
		{
			name:        "deletion not over within the timeout",
			recorded:    []string{hookManifest("ConfigMap", "", "stuck", hookOnly)},
			live:        hookManifest("ConfigMap", "", "stuck", hookOnly),
			finalizer:   true,
			wantDeleted: []string{"ConfigMap/%s/stuck"},
			wantErr:     []string{"release cleanup uninstalled", "waiting for the deletion of ConfigMap/%s/stuck"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("cleanup-%d", i)
			createNamespaces(t, cs, ns)
			cfg, err := factory.Build(ns, ns, WithLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			var live *kube.ResourceList
			if tt.live != "" {
				live = createLive(t, cfg, tt.live, tt.finalizer)
			}
			c := &hookCleanup{cfg: cfg, release: "cleanup"}
			for _, m := range tt.recorded {
				c.hooks = append(c.hooks, &releasev1.Hook{Manifest: m, Path: "templates/hook.yaml"})
			}
			u := helmaction.NewUninstall(cfg)
			u.WaitStrategy, u.Timeout = kube.StatusWatcherStrategy, 2*time.Second

			deleted, err := c.run(u)

			want := make([]string, len(tt.wantDeleted))
			for i, d := range tt.wantDeleted {
				want[i] = fmt.Sprintf(d, ns)
			}
			if !slices.Equal(deleted, want) {
				t.Errorf("deleted %v, want %v", deleted, want)
			}
			checkCleanupError(t, err, tt.wantErr, ns)
			if live == nil {
				return
			}
			for _, info := range *live {
				gone := len(want) > 0
				if tt.finalizer {
					removeFinalizers(t, dyn, info.Mapping.Resource, info.Namespace, info.Name)
					continue
				}
				_, getErr := dyn.Resource(info.Mapping.Resource).Namespace(info.Namespace).Get(ctx, info.Name, metav1.GetOptions{})
				if gone != apierrors.IsNotFound(getErr) {
					t.Errorf("%s/%s: get after the cleanup: %v, want gone=%v", info.Mapping.Resource.Resource, info.Name, getErr, gone)
				}
				if info.Mapping.GroupVersionKind.Kind == "CustomResourceDefinition" {
					_ = dyn.Resource(info.Mapping.Resource).Delete(ctx, info.Name, metav1.DeleteOptions{})
				}
			}
		})
	}
}

// TestAgainstAPIServerHookCleanupIdentity uninstalls as an identity that
// may not delete ServiceAccounts (the impersonated identity of a
// HelmRelease's serviceAccountName): the cleanup works as that identity, reports the ServiceAccount it could not delete, deletes the
// other hook objects, and the uninstall itself is complete.
func TestAgainstAPIServerHookCleanupIdentity(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	const ns, user = "cleanup-identity", "hook-cleaner"
	createNamespaces(t, cs, ns)
	grant(t, cs, ns, user, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
	})

	admin, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	asUser := rest.CopyConfig(restCfg)
	asUser.Impersonate.UserName = user
	restricted, err := admin.ForGetter(NewRESTClientGetter(asUser))
	if err != nil {
		t.Fatal(err)
	}
	obj := newHR(withTimeout(30*time.Second), func(o *v2.HelmRelease) {
		o.Name, o.Namespace = "hooks", ns
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
	})
	chart := &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "identity", Version: "1.0.0"},
		Values:   map[string]any{"foo": "x"},
		Templates: []*common.File{
			{Name: "templates/cm.yaml", Data: []byte(configMapTemplate)},
			{Name: "templates/sa.yaml", Data: []byte(hookManifest("ServiceAccount", "", "hooks-sa", map[string]string{"helm.sh/hook": "post-install"}))},
			{Name: "templates/hook-cm.yaml", Data: []byte(hookManifest("ConfigMap", "", "hooks-settings", map[string]string{"helm.sh/hook": "post-install"}))},
		},
	}
	// Helm's install deletes a hook object before creating it
	// (before-hook-creation), which the identity may not do either.
	adminCfg, err := admin.Build(ns, ns, WithLogger(testr.New(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Install(ctx, adminCfg, obj, chart, nil, Options{}); err != nil {
		t.Fatalf("install: %v", err)
	}
	cfg, err := restricted.Build(ns, ns, WithLogger(testr.New(t)))
	if err != nil {
		t.Fatal(err)
	}

	var heard []string
	_, err = Uninstall(ctx, cfg, obj, Options{HookResourcesDeleted: func(d []string) { heard = d }})

	checkCleanupError(t, err, []string{"release hooks uninstalled", "deleting ServiceAccount/" + ns + "/hooks-sa", "forbidden", user}, ns)
	if want := []string{"ConfigMap/" + ns + "/hooks-settings"}; !slices.Equal(heard, want) {
		t.Errorf("deleted %v, want %v", heard, want)
	}
	wantExists(t, cs, "ServiceAccount/"+ns+"/hooks-sa", true)
	wantExists(t, cs, "ConfigMap/"+ns+"/hooks-settings", false)
	wantExists(t, cs, "ConfigMap/"+ns+"/hooks-cm", false)
	if rels, err := History(cfg, "hooks"); err != nil || len(rels) != 0 {
		t.Errorf("release records after the uninstall: %d (%v), want none", len(rels), err)
	}
}

// checkCleanupError checks that err is nil when want is, else a
// *HookCleanupError whose message contains each of want (%s is ns).
func checkCleanupError(t *testing.T, err error, want []string, ns string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("error %v, want none", err)
		}
		return
	}
	var cleanup *HookCleanupError
	if !errors.As(err, &cleanup) {
		t.Fatalf("error %v (%T), want a *HookCleanupError", err, err)
	}
	for _, w := range want {
		if w = strings.ReplaceAll(w, "%s", ns); !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// createLive creates manifest in cfg's namespace, with a finalizer when
// asked, and returns it as built by cfg's kube client.
func createLive(t *testing.T, cfg *helmaction.Configuration, manifest string, finalizer bool) *kube.ResourceList {
	t.Helper()
	if finalizer {
		manifest = strings.Replace(manifest, "metadata:\n", "metadata:\n  finalizers:\n  - cleanup.example.com/hold\n", 1)
	}
	infos, err := cfg.KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.KubeClient.Create(infos); err != nil {
		t.Fatal(err)
	}
	return &infos
}

func removeFinalizers(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	_, err := dyn.Resource(gvr).Namespace(ns).Patch(context.Background(), name, types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func mustCreateConfigMap(t *testing.T, cs kubernetes.Interface, ns, name string, annotations map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// wantExists checks whether the ConfigMap or ServiceAccount
// "Kind/namespace/name" exists.
func wantExists(t *testing.T, cs kubernetes.Interface, id string, exists bool) {
	t.Helper()
	parts := strings.SplitN(id, "/", 3)
	ctx := context.Background()
	var err error
	switch parts[0] {
	case "ConfigMap":
		_, err = cs.CoreV1().ConfigMaps(parts[1]).Get(ctx, parts[2], metav1.GetOptions{})
	case "ServiceAccount":
		_, err = cs.CoreV1().ServiceAccounts(parts[1]).Get(ctx, parts[2], metav1.GetOptions{})
	default:
		t.Fatalf("wantExists: unsupported kind in %s", id)
	}
	if exists && err != nil {
		t.Errorf("%s: %v, want it left", id, err)
	}
	if !exists && !apierrors.IsNotFound(err) {
		t.Errorf("%s: %v, want it gone", id, err)
	}
}

// grant binds user to a Role of rules in ns.
func grant(t *testing.T, cs kubernetes.Interface, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user}, Rules: rules}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
