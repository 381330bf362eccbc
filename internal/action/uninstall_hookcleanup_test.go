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
	releasecommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	batchv1 "k8s.io/api/batch/v1"
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
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/test/envtestserver"
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
	case "Pod":
		obj["apiVersion"] = "v1"
		obj["spec"] = map[string]any{
			"restartPolicy": "Never",
			"containers":    []any{map[string]any{"name": "run", "image": "example.com/run:1"}},
		}
	case "CustomResourceDefinition":
		obj["apiVersion"] = "apiextensions.k8s.io/v1"
	case "PersistentVolumeClaim":
		obj["apiVersion"] = "v1"
		obj["spec"] = map[string]any{
			"accessModes": []any{"ReadWriteOnce"},
			"resources":   map[string]any{"requests": map[string]any{"storage": "1Mi"}},
		}
	case "ClusterRole":
		obj["apiVersion"] = "rbac.authorization.k8s.io/v1"
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
// named after the value rev is a different object in each revision. Its
// hook Namespace and PersistentVolumeClaim must outlive any cleanup, and
// its hook shared-hook has the name of rivalChart's.
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
		"password.yaml":     hookManifest("Secret", "", "{{ .Release.Name }}-password", hook("pre-install")),
		"pre-upgrade.yaml":  hookManifest("ConfigMap", "", "{{ .Release.Name }}-pre-upgrade", hook("pre-upgrade")),
		"versioned.yaml":    hookManifest("ConfigMap", "", "{{ .Release.Name }}-versioned-{{ .Values.rev }}", hook("post-install,post-upgrade")),
		"keep.yaml":         hookManifest("ConfigMap", "", "{{ .Release.Name }}-keep", hook("pre-install", "helm.sh/resource-policy", "keep")),
		"succeeded.yaml":    hookManifest("ConfigMap", "", "{{ .Release.Name }}-succeeded", hook("post-install", "helm.sh/hook-delete-policy", "hook-succeeded")),
		"pre-delete.yaml":   hookManifest("ConfigMap", "", "{{ .Release.Name }}-pre-delete", hook("pre-delete")),
		"post-delete.yaml":  hookManifest("ServiceAccount", "", "{{ .Release.Name }}-post-delete", hook("post-delete")),
		"elsewhere.yaml":    hookManifest("ConfigMap", other, "{{ .Release.Name }}-elsewhere", hook("post-install")),
		"namespace.yaml":    hookManifest("Namespace", "", "{{ .Release.Namespace }}-hookns", hook("pre-install")),
		"pvc.yaml":          hookManifest("PersistentVolumeClaim", "", "{{ .Release.Name }}-data", hook("pre-install")),
		"shared.yaml":       hookManifest("ConfigMap", "", "shared-hook", hook("post-install")),
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

// rivalChart has one hook, shared-hook, of the same name as one of
// hookLeftoversChart's.
func rivalChart() *chartv2.Chart {
	return &chartv2.Chart{
		Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "rival", Version: "1.0.0"},
		Templates: []*common.File{{Name: "templates/shared.yaml", Data: []byte(
			hookManifest("ConfigMap", "", "shared-hook", map[string]string{"helm.sh/hook": "post-install"}))}},
	}
}

// installRival installs rivalChart as another release of the same name,
// "hooks", into target, with its records in storage: another HelmRelease
// with releaseName hooks and targetNamespace target. Its hook runs after
// those of the release under test, so Helm's before-hook-creation replaces
// that release's shared-hook with its own.
func installRival(t *testing.T, factory *ConfigFactory, target, storage string) {
	t.Helper()
	rival := newHR(func(o *v2.HelmRelease) {
		o.Name, o.Namespace = "rival", storage
		o.Spec.ReleaseName, o.Spec.TargetNamespace, o.Spec.StorageNamespace = "hooks", target, storage
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
	})
	cfg, err := factory.Build(storage, target, withLogger(testr.New(t)), WithHookMarks(HookMarks(rival)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Install(context.Background(), cfg, rival, rivalChart(), nil, planned(t, nil, rival, plan.Install, asked{})); err != nil {
		t.Fatalf("installing the rival release: %v", err)
	}
}

// TestAgainstAPIServerUninstallDeleteHookResources installs the leftovers
// chart, upgrades it, lets another release of the same name (records in
// another namespace) replace one of its hook objects with its own, and
// uninstalls it with and without deleteHookResources and keepHistory.
// Without the option Helm's behaviour is unchanged: every hook object
// without a delete policy stays, the pre- and post-delete hooks of the
// uninstall too, and none is marked. With it the release's own hook
// objects are gone, from both revisions and from another namespace, while
// these stay, each reported with the reason: the hook Namespace and
// PersistentVolumeClaim, the hook the chart keeps, the other release's
// hook of the same name and an object that only shares a hook's name.
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
		// kinds is spec.uninstall.deleteHookResourceKinds.
		kinds []string
	}{
		{name: "helm-default"},
		{name: "helm-default-keep-history", keepHistory: true},
		{name: "delete-hooks", deleteHooks: true},
		{name: "delete-hooks-data-kinds", deleteHooks: true, kinds: []string{"ConfigMap", "Secret"}},
		{name: "delete-hooks-keep-history", deleteHooks: true, keepHistory: true, kinds: []string{"*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, other := "leftovers-"+tt.name, "leftovers-"+tt.name+"-other"
			createNamespaces(t, cs, ns, other)
			obj := newHR(withTimeout(30*time.Second), func(o *v2.HelmRelease) {
				o.Name, o.Namespace = "hooks", ns
				o.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{KeepHistory: tt.keepHistory},
					DeleteHookResources: tt.deleteHooks, DeleteHookResourceKinds: tt.kinds}
			})
			cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)), WithHookMarks(HookMarks(obj)))
			if err != nil {
				t.Fatal(err)
			}
			chart := hookLeftoversChart(other)
			if _, err := Install(ctx, cfg, obj, chart, nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
				t.Fatalf("install: %v", err)
			}
			if _, err := Upgrade(ctx, cfg, obj, chart, map[string]any{"rev": "2"}, planned(t, cfg, obj, plan.Upgrade, asked{})); err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			if !tt.deleteHooks {
				wantNoMarks(t, cs, ns, other)
			}
			// Helm deleted the hook-succeeded ConfigMap; one of the same
			// name that is no hook must survive any cleanup.
			mustCreateConfigMap(t, cs, ns, "hooks-succeeded", nil)
			installRival(t, factory, ns, other)

			var deleted, left []string
			opts := asked{
				observer: hearing{hookResources: func(d, l []string) {
					deleted, left = append(deleted, d...), append(left, l...)
				}},
			}
			if _, err := Uninstall(ctx, cfg, obj, planned(t, cfg, obj, plan.Uninstall, opts)); err != nil {
				t.Fatalf("uninstall: %v", err)
			}

			// leftovers are deleted with the option; dataLeftovers only
			// when their kind is listed (the pre-install Secret stands for
			// a generated password the chart reads back with lookup).
			leftovers := []string{
				"ServiceAccount/" + ns + "/hooks-post-install",
				"ServiceAccount/" + ns + "/hooks-post-delete",
			}
			dataLeftovers := []string{
				"ConfigMap/" + ns + "/hooks-pre-install",
				"Secret/" + ns + "/hooks-password",
				"ConfigMap/" + ns + "/hooks-pre-upgrade",
				"ConfigMap/" + ns + "/hooks-versioned-1",
				"ConfigMap/" + ns + "/hooks-versioned-2",
				"ConfigMap/" + ns + "/hooks-pre-delete",
				"ConfigMap/" + other + "/hooks-elsewhere",
			}
			wantGone := slices.Clone(leftovers)
			var dataLeft []string
			for _, id := range dataLeftovers {
				kind := strings.SplitN(id, "/", 2)[0]
				if slices.Contains(tt.kinds, kind) || slices.Contains(tt.kinds, "*") {
					wantGone = append(wantGone, id)
				} else {
					dataLeft = append(dataLeft, id)
				}
			}
			// always stay, with the reason reported.
			always := map[string]string{
				"ConfigMap/" + ns + "/hooks-keep":             "helm.sh/resource-policy: keep",
				"ConfigMap/" + ns + "/hooks-succeeded":        "not a hook object",
				"Namespace/" + ns + "-hookns":                 "a Namespace is never deleted",
				"PersistentVolumeClaim/" + ns + "/hooks-data": "a PersistentVolumeClaim is never deleted",
				"ConfigMap/" + ns + "/shared-hook":            "created by the hooks of release " + other + "/hooks",
			}
			for _, id := range wantGone {
				wantExists(t, cs, id, !tt.deleteHooks)
			}
			for _, id := range dataLeft {
				wantExists(t, cs, id, true)
			}
			for id := range always {
				wantExists(t, cs, id, true)
			}
			wantExists(t, cs, "ConfigMap/"+ns+"/hooks-cm", false)

			var wantDeleted, wantLeft []string
			if tt.deleteHooks {
				wantDeleted = wantGone
				for id, reason := range always {
					wantLeft = append(wantLeft, id+" ("+reason+")")
				}
				for _, id := range dataLeft {
					kind := strings.SplitN(id, "/", 2)[0]
					wantLeft = append(wantLeft, fmt.Sprintf("%s (a %s may hold data: deleted only when %s lists %s)",
						id, kind, hookcleanup.KindsField, kind))
				}
			}
			slices.Sort(wantDeleted)
			slices.Sort(deleted)
			if !slices.Equal(deleted, wantDeleted) {
				t.Errorf("deleted objects reported:\n%v\nwant:\n%v", deleted, wantDeleted)
			}
			slices.Sort(wantLeft)
			slices.Sort(left)
			if !slices.Equal(left, wantLeft) {
				t.Errorf("objects left reported:\n%v\nwant:\n%v", left, wantLeft)
			}
			wantRecordsEnded(t, cfg, "hooks", tt.keepHistory, 2)
		})
	}
}

// wantRecordsEnded checks that the records of release are as Helm's
// uninstall leaves them: none, or with keepHistory the revisions kept, the
// newest uninstalled with Helm's description.
func wantRecordsEnded(t *testing.T, cfg *helmaction.Configuration, release string, keepHistory bool, revisions int) {
	t.Helper()
	rels, err := History(cfg, release)
	if err != nil {
		t.Fatal(err)
	}
	if !keepHistory {
		if len(rels) != 0 {
			t.Errorf("%d release records after the uninstall, want none", len(rels))
		}
		return
	}
	if len(rels) != revisions {
		t.Fatalf("%d release records after the uninstall, want %d", len(rels), revisions)
	}
	if info := rels[0].Info; info.Status != releasecommon.StatusUninstalled || info.Description != "Uninstallation complete" {
		t.Errorf("newest record %s %q, want uninstalled %q", info.Status, info.Description, "Uninstallation complete")
	}
}

// wantNoMarks checks that no ConfigMap or ServiceAccount in namespaces
// carries the mark: without deleteHookResources hooks are created as Helm
// creates them.
func wantNoMarks(t *testing.T, cs kubernetes.Interface, namespaces ...string) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range namespaces {
		cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sas, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var metas []metav1.ObjectMeta
		for _, cm := range cms.Items {
			metas = append(metas, cm.ObjectMeta)
		}
		for _, sa := range sas.Items {
			metas = append(metas, sa.ObjectMeta)
		}
		for _, m := range metas {
			if mark, ok := m.Annotations[hookcleanup.OriginAnnotation]; ok {
				t.Errorf("%s/%s marked %q without deleteHookResources", ns, m.Name, mark)
			}
		}
	}
}

// TestAgainstAPIServerHookCleanupObjects runs the cleanup of the release
// "cleanup" (records in the test's namespace) on single hook records and
// the objects found under their names.
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
	// ours marks an object as made by the hooks of the release under test,
	// in namespace ns; theirs as made by those of a release of the same
	// name whose records live elsewhere.
	ours := func(a map[string]string) map[string]string {
		return withAnnotation(a, hookcleanup.OriginAnnotation, "%s/cleanup")
	}
	theirs := withAnnotation(hookOnly, hookcleanup.OriginAnnotation, "elsewhere/cleanup")

	tests := []struct {
		name string
		// recorded are the hook manifests of the release records.
		recorded []string
		// live is the object in the cluster under the hook's name, as a
		// manifest (%s is the namespace); empty for none.
		live string
		// finalizer keeps the live object from going away.
		finalizer bool
		// run is how far the run of each live Job or Pod got, as its
		// controller (which envtest does not run) would have written it.
		run hookRun
		// late runs the cleanup with its deadline passed.
		late bool
		// listed is spec.uninstall.deleteHookResourceKinds; ConfigMap
		// when nil.
		listed      []string
		wantDeleted []string
		// wantLeft are the reasons reported for the object left; nil
		// when it is not reported.
		wantLeft []string
		// wantErr are substrings of the error; nil means none.
		wantErr []string
	}{
		{
			name:        "this release's hook",
			recorded:    []string{hookManifest("ConfigMap", "", "left", hookOnly)},
			live:        hookManifest("ConfigMap", "", "left", ours(hookOnly)),
			wantDeleted: []string{"ConfigMap/%s/left"},
		},
		{
			name:        "job deleted in the background",
			recorded:    []string{hookManifest("Job", "", "migrate", hookOnly)},
			live:        hookManifest("Job", "", "migrate", ours(hookOnly)),
			run:         runComplete,
			wantDeleted: []string{"Job/%s/migrate"},
		},
		{
			name:     "a hook Job still running",
			recorded: []string{hookManifest("Job", "", "running", hookOnly)},
			live:     hookManifest("Job", "", "running", ours(hookOnly)),
			run:      runRunning,
			listed:   []string{},
			wantLeft: []string{"Job/%s/running (a Job that is still running (1 active pods): deleting it would stop it halfway; left to finish)"},
		},
		{
			name:     "a hook Job not started yet",
			recorded: []string{hookManifest("Job", "", "pending", hookOnly)},
			live:     hookManifest("Job", "", "pending", ours(hookOnly)),
			listed:   []string{},
			wantLeft: []string{"Job/%s/pending (a Job that has not finished (neither Complete nor Failed): deleting it would stop it halfway; left to finish)"},
		},
		{
			name:        "a hook Job failed",
			recorded:    []string{hookManifest("Job", "", "failed", hookOnly)},
			live:        hookManifest("Job", "", "failed", ours(hookOnly)),
			run:         runFailed,
			listed:      []string{},
			wantDeleted: []string{"Job/%s/failed"},
		},
		{
			name:     "a hook Pod running",
			recorded: []string{hookManifest("Pod", "", "running", hookOnly)},
			live:     hookManifest("Pod", "", "running", ours(hookOnly)),
			run:      runRunning,
			listed:   []string{},
			wantLeft: []string{"Pod/%s/running (a Pod that has not finished (phase Running): deleting it would stop it halfway; left to finish)"},
		},
		{
			name:        "a hook Pod succeeded",
			recorded:    []string{hookManifest("Pod", "", "succeeded", hookOnly)},
			live:        hookManifest("Pod", "", "succeeded", ours(hookOnly)),
			run:         runComplete,
			listed:      []string{},
			wantDeleted: []string{"Pod/%s/succeeded"},
		},
		{
			name:        "a hook Pod failed",
			recorded:    []string{hookManifest("Pod", "", "failed", hookOnly)},
			live:        hookManifest("Pod", "", "failed", ours(hookOnly)),
			run:         runFailed,
			listed:      []string{},
			wantDeleted: []string{"Pod/%s/failed"},
		},
		{
			name:     "a running hook Job with no time left: left, not late",
			recorded: []string{hookManifest("Job", "", "running-late", hookOnly)},
			live:     hookManifest("Job", "", "running-late", ours(hookOnly)),
			run:      runRunning,
			late:     true,
			listed:   []string{},
			wantLeft: []string{"Job/%s/running-late (a Job that is still running (1 active pods): deleting it would stop it halfway; left to finish)"},
		},
		{
			name:        "cluster-scoped, marked by this release",
			recorded:    []string{hookManifest("ClusterRole", "", "cleanup-%s-reader", hookOnly)},
			live:        hookManifest("ClusterRole", "", "cleanup-%s-reader", ours(hookOnly)),
			wantDeleted: []string{"ClusterRole/cleanup-%s-reader"},
		},
		{
			name: "recorded by two revisions",
			recorded: []string{
				hookManifest("ConfigMap", "", "twice", hookOnly),
				hookManifest("ConfigMap", "", "twice", map[string]string{"helm.sh/hook": "post-install,post-upgrade"}),
			},
			live:        hookManifest("ConfigMap", "", "twice", ours(hookOnly)),
			wantDeleted: []string{"ConfigMap/%s/twice"},
		},
		{
			name:     "another release's hook of the same name",
			recorded: []string{hookManifest("ConfigMap", "", "same-name", hookOnly)},
			live:     hookManifest("ConfigMap", "", "same-name", theirs),
			wantLeft: []string{"ConfigMap/%s/same-name (created by the hooks of release elsewhere/cleanup)"},
		},
		{
			name:     "a hook without the mark",
			recorded: []string{hookManifest("ConfigMap", "", "unmarked", hookOnly)},
			live:     hookManifest("ConfigMap", "", "unmarked", hookOnly),
			wantLeft: []string{"ConfigMap/%s/unmarked (no " + hookcleanup.OriginAnnotation + " mark to prove this release's hooks created it)"},
		},
		{
			name:     "cluster-scoped without the mark",
			recorded: []string{hookManifest("ClusterRole", "", "cleanup-%s-unmarked", hookOnly)},
			live:     hookManifest("ClusterRole", "", "cleanup-%s-unmarked", hookOnly),
			wantLeft: []string{"ClusterRole/cleanup-%s-unmarked (no " + hookcleanup.OriginAnnotation + " mark to prove this release's hooks created it)"},
		},
		{
			name:     "same name but not a hook",
			recorded: []string{hookManifest("ConfigMap", "", "plain", hookOnly)},
			live:     hookManifest("ConfigMap", "", "plain", ours(nil)),
			wantLeft: []string{"ConfigMap/%s/plain (not a hook object)"},
		},
		{
			name:     "kept by the live object",
			recorded: []string{hookManifest("ConfigMap", "", "kept-live", hookOnly)},
			live:     hookManifest("ConfigMap", "", "kept-live", ours(keepHook)),
			wantLeft: []string{"ConfigMap/%s/kept-live (helm.sh/resource-policy: keep)"},
		},
		{
			name:     "kept by the chart",
			recorded: []string{hookManifest("ConfigMap", "", "kept-chart", keepHook)},
			live:     hookManifest("ConfigMap", "", "kept-chart", ours(hookOnly)),
			wantLeft: []string{"ConfigMap/%s/kept-chart (helm.sh/resource-policy: keep)"},
		},
		{
			name:     "a hook Secret, by default",
			recorded: []string{hookManifest("Secret", "", "password", hookOnly)},
			live:     hookManifest("Secret", "", "password", ours(hookOnly)),
			listed:   []string{},
			wantLeft: []string{"Secret/%s/password (a Secret may hold data: deleted only when " + hookcleanup.KindsField + " lists Secret)"},
		},
		{
			name:        "a hook Secret, its kind listed",
			recorded:    []string{hookManifest("Secret", "", "password", hookOnly)},
			live:        hookManifest("Secret", "", "password", ours(hookOnly)),
			listed:      []string{"Secret"},
			wantDeleted: []string{"Secret/%s/password"},
		},
		{
			name:        "a hook Job and its ServiceAccount, by default",
			recorded:    []string{hookManifest("Job", "", "seed", hookOnly), hookManifest("ServiceAccount", "", "seed", hookOnly)},
			live:        hookManifest("Job", "", "seed", ours(hookOnly)) + "---\n" + hookManifest("ServiceAccount", "", "seed", ours(hookOnly)),
			run:         runComplete,
			listed:      []string{},
			wantDeleted: []string{"Job/%s/seed", "ServiceAccount/%s/seed"},
		},
		{
			name:     "a PersistentVolumeClaim, even marked",
			recorded: []string{hookManifest("PersistentVolumeClaim", "", "data", hookOnly)},
			live:     hookManifest("PersistentVolumeClaim", "", "data", ours(hookOnly)),
			wantLeft: []string{"PersistentVolumeClaim/%s/data (a PersistentVolumeClaim is never deleted)"},
		},
		{
			name:     "a Namespace, even marked",
			recorded: []string{hookManifest("Namespace", "", "cleanup-%s-ns", hookOnly)},
			live:     hookManifest("Namespace", "", "cleanup-%s-ns", ours(hookOnly)),
			wantLeft: []string{"Namespace/cleanup-%s-ns (a Namespace is never deleted)"},
		},
		{
			name:     "already gone",
			recorded: []string{hookManifest("ConfigMap", "", "gone", hookOnly)},
		},
		{
			name:     "CRDs are never deleted",
			recorded: []string{hookManifest("CustomResourceDefinition", "", crdName, hookOnly)},
			live: strings.Replace(crdYAML("gadgets", "Gadget", "cleanup.example.com", "1"),
				"metadata:\n", "metadata:\n  annotations:\n    helm.sh/hook: post-install\n    "+hookcleanup.OriginAnnotation+": '%s/cleanup'\n", 1),
			wantLeft: []string{"CustomResourceDefinition/" + crdName + " (a CustomResourceDefinition is never deleted)"},
		},
		{
			name:     "kind no longer served",
			recorded: []string{"apiVersion: nowhere.example.com/v1\nkind: Gizmo\nmetadata:\n  name: g\n"},
		},
		{
			name:        "deletion not over within the timeout",
			recorded:    []string{hookManifest("ConfigMap", "", "stuck", hookOnly)},
			live:        hookManifest("ConfigMap", "", "stuck", ours(hookOnly)),
			finalizer:   true,
			wantDeleted: []string{"ConfigMap/%s/stuck"},
			wantErr:     []string{"release cleanup uninstalled", "waiting for the deletion of ConfigMap/%s/stuck"},
		},
		{
			name:     "no time left of the uninstall timeout",
			recorded: []string{hookManifest("ConfigMap", "", "late", hookOnly)},
			live:     hookManifest("ConfigMap", "", "late", ours(hookOnly)),
			late:     true,
			wantErr:  []string{"no time left of the uninstall timeout to delete ConfigMap/%s/late"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := fmt.Sprintf("cleanup-%d", i)
			createNamespaces(t, cs, ns)
			cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			var live *kube.ResourceList
			if tt.live != "" {
				live = createLive(t, cfg, strings.ReplaceAll(tt.live, "%s", ns), tt.finalizer)
				for _, info := range *live {
					setRun(t, cs, info.Mapping.GroupVersionKind.Kind, ns, info.Name, tt.run)
				}
			}
			// ConfigMaps stand for any hook object in these cases; the
			// cases with listed set test the kinds themselves.
			listed := tt.listed
			if listed == nil {
				listed = []string{"ConfigMap"}
			}
			kinds, err := hookcleanup.ParseKinds(listed)
			if err != nil {
				t.Fatal(err)
			}
			c := &hookCleanup{cfg: cfg, release: "cleanup", origin: hookcleanup.Origin(ns, "cleanup"), kinds: kinds}
			for _, m := range tt.recorded {
				c.hooks = append(c.hooks, &releasev1.Hook{Manifest: strings.ReplaceAll(m, "%s", ns), Path: "templates/hook.yaml"})
			}
			deadline := time.Now().Add(2 * time.Second)
			if tt.late {
				deadline = time.Now().Add(-time.Second)
			}

			report, err := c.run(deadline, kube.StatusWatcherStrategy, nil)

			if want := inNamespace(tt.wantDeleted, ns); !slices.Equal(report.deleted, want) {
				t.Errorf("deleted %v, want %v", report.deleted, want)
			}
			if want := inNamespace(tt.wantLeft, ns); !slices.Equal(report.left, want) {
				t.Errorf("left %v, want %v", report.left, want)
			}
			checkCleanupError(t, err, tt.wantErr, ns)
			if live == nil {
				return
			}
			for _, info := range *live {
				gone := len(tt.wantDeleted) > 0
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

// withAnnotation returns a copy of a with k set to v.
func withAnnotation(a map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range a {
		out[key] = val
	}
	return out
}

// inNamespace fills %s in each of names with ns; nil stays nil.
func inNamespace(names []string, ns string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ReplaceAll(n, "%s", ns)
	}
	return out
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
		// The hooks are ConfigMaps: a kind deleted only when listed.
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true, DeleteHookResourceKinds: []string{"ConfigMap"}}
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
	adminCfg, err := admin.Build(ns, ns, withLogger(testr.New(t)), WithHookMarks(HookMarks(obj)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Install(ctx, adminCfg, obj, chart, nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
		t.Fatalf("install: %v", err)
	}
	cfg, err := restricted.Build(ns, ns, withLogger(testr.New(t)))
	if err != nil {
		t.Fatal(err)
	}

	var heard []string
	_, err = Uninstall(ctx, cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{observer: hearing{hookResources: func(d, _ []string) { heard = d }}}))

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

// hooksChart is a chart with a ConfigMap of its own and the hook
// ConfigMaps named; each runs post-install unless its name ends in
// pre-delete.
func hooksChart(hooks ...string) *chartv2.Chart {
	c := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "hooks", Version: "1.0.0"},
		Values:    map[string]any{"foo": "x"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(configMapTemplate)}},
	}
	for _, name := range hooks {
		event := "post-install"
		if strings.HasSuffix(name, "pre-delete") {
			event = "pre-delete"
		}
		c.Templates = append(c.Templates, &common.File{Name: "templates/" + name + ".yaml",
			Data: []byte(hookManifest("ConfigMap", "", name, map[string]string{"helm.sh/hook": event}))})
	}
	return c
}

// installHooks installs hooksChart(hooks...) as release "hooks" in a new
// namespace ns, with deleteHookResources and the mutators, and returns the
// HelmRelease and its configuration.
func installHooks(t *testing.T, restCfg *rest.Config, ns string, hooks []string, mutators ...func(*v2.HelmRelease)) (*v2.HelmRelease, *helmaction.Configuration) {
	t.Helper()
	createNamespaces(t, kubernetes.NewForConfigOrDie(restCfg), ns)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	obj := newHR(withTimeout(30*time.Second), func(o *v2.HelmRelease) {
		o.Name, o.Namespace = "hooks", ns
		// The hooks are ConfigMaps: a kind deleted only when listed.
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true, DeleteHookResourceKinds: []string{"ConfigMap"}}
	})
	for _, m := range mutators {
		m(obj)
	}
	cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)), WithHookMarks(HookMarks(obj)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Install(context.Background(), cfg, obj, hooksChart(hooks...), nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
		t.Fatalf("install: %v", err)
	}
	return obj, cfg
}

// The release records are the only list of a release's hooks. While the
// cleanup deletes the hook objects, they are still there, marked as an
// uninstall whose cleanup is pending, so that a controller stopped at this
// moment finds them again; they are deleted after it.
func TestAgainstAPIServerHookCleanupKeepsTheRecordsUntilItIsOver(t *testing.T) {
	restCfg := apiServer(t)
	const ns = "cleanup-records"
	obj, cfg := installHooks(t, restCfg, ns, []string{"hooks-setup"})
	var during []*releasev1.Release
	var readErr error
	opts := asked{observer: hearing{hookResources: func(_, _ []string) { during, readErr = History(cfg, "hooks") }}}

	if _, err := Uninstall(context.Background(), cfg, obj, planned(t, cfg, obj, plan.Uninstall, opts)); err != nil {
		t.Fatalf("uninstall: %v", err)
	}

	if readErr != nil {
		t.Fatal(readErr)
	}
	if len(during) != 1 || !hookcleanup.Pending(during[0]) {
		t.Errorf("records while the hook objects were deleted: %s, want the one revision, uninstalled with the cleanup pending", describeRecords(during))
	}
	wantExists(t, kubernetes.NewForConfigOrDie(restCfg), "ConfigMap/"+ns+"/hooks-setup", false)
	wantRecordsEnded(t, cfg, "hooks", false, 1)
}

func describeRecords(rels []*releasev1.Release) string {
	var parts []string
	for _, r := range rels {
		parts = append(parts, fmt.Sprintf("v%d %s %q", r.Version, r.Info.Status, r.Info.Description))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// A controller stopped between Helm's part of the uninstall and the end of
// the cleanup left the release uninstalled with its records marked. The
// next Uninstall does not run Helm's uninstall again (on an uninstalled
// release it would fail, or with keepHistory off delete the records and
// with them the list of the hooks): it deletes the hook objects, the
// pre-delete hook the first run made included, and ends the records as
// Helm would have.
func TestAgainstAPIServerHookCleanupResumed(t *testing.T) {
	restCfg := apiServer(t)
	cs := kubernetes.NewForConfigOrDie(restCfg)
	for _, keepHistory := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepHistory %t", keepHistory), func(t *testing.T) {
			ns := fmt.Sprintf("cleanup-resumed-%t", keepHistory)
			obj, cfg := installHooks(t, restCfg, ns, []string{"hooks-setup", "hooks-pre-delete"}, func(o *v2.HelmRelease) {
				o.Spec.Uninstall.KeepHistory = keepHistory
			})
			// What the stopped controller's Helm uninstall left.
			stopped := helmaction.NewUninstall(cfg)
			stopped.KeepHistory, stopped.Description = true, hookcleanup.PendingDescription
			stopped.WaitStrategy, stopped.Timeout = kube.StatusWatcherStrategy, 30*time.Second
			if _, err := stopped.Run("hooks"); err != nil {
				t.Fatal(err)
			}
			wantExists(t, cs, "ConfigMap/"+ns+"/hooks-cm", false)
			wantExists(t, cs, "ConfigMap/"+ns+"/hooks-pre-delete", true)

			var deleted []string
			_, err := Uninstall(context.Background(), cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{observer: hearing{hookResources: func(d, _ []string) { deleted = d }}}))
			if err != nil {
				t.Fatalf("uninstall: %v", err)
			}

			slices.Sort(deleted)
			if want := []string{"ConfigMap/" + ns + "/hooks-pre-delete", "ConfigMap/" + ns + "/hooks-setup"}; !slices.Equal(deleted, want) {
				t.Errorf("deleted %v, want %v", deleted, want)
			}
			wantExists(t, cs, "ConfigMap/"+ns+"/hooks-setup", false)
			wantExists(t, cs, "ConfigMap/"+ns+"/hooks-pre-delete", false)
			wantRecordsEnded(t, cfg, "hooks", keepHistory, 1)
		})
	}
}

// Helm's part of the uninstall takes a while here (the release's ConfigMap
// has a finalizer, removed after helmPart), and the deletion of a hook
// object never ends (a finalizer no one removes). Uninstall returns within
// the uninstall timeout all the same: the cleanup waits only for what is
// left of it.
func TestAgainstAPIServerHookCleanupWithinTheUninstallTimeout(t *testing.T) {
	restCfg := apiServer(t)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	const ns = "cleanup-timeout"
	const timeout, helmPart = 6 * time.Second, 3 * time.Second
	obj, cfg := installHooks(t, restCfg, ns, []string{"hooks-stuck"}, withTimeout(timeout))
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, name := range []string{"hooks-cm", "hooks-stuck"} {
		_, err := dyn.Resource(configMaps).Namespace(ns).Patch(context.Background(), name, types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":["cleanup.example.com/hold"]}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	defer removeFinalizers(t, dyn, configMaps, ns, "hooks-stuck")
	released := make(chan error, 1)
	go func() {
		time.Sleep(helmPart)
		_, err := dyn.Resource(configMaps).Namespace(ns).Patch(context.Background(), "hooks-cm", types.MergePatchType,
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		released <- err
	}()

	began := time.Now()
	_, err := Uninstall(context.Background(), cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{}))
	took := time.Since(began)

	if err := <-released; err != nil {
		t.Fatal(err)
	}
	checkCleanupError(t, err, []string{"waiting for the deletion of ConfigMap/%s/hooks-stuck"}, ns)
	if took < helmPart || took > timeout+1500*time.Millisecond {
		t.Errorf("the uninstall took %s, want the timeout %s at most (Helm's part alone took %s)", took.Round(100*time.Millisecond), timeout, helmPart)
	}
	wantRecordsEnded(t, cfg, "hooks", false, 1)
}

// Helm's uninstall can fail after it recorded the release uninstalled:
// here its wait for the release's ConfigMap (a finalizer no one removes)
// outlasts the timeout. Helm would still have deleted the records; so
// does the cleanup, after its own turn, for which no time is left. The
// error stays Helm's, with the cleanup's said beside it, so that the
// controller reports a failed uninstall, not a failed cleanup.
func TestAgainstAPIServerHookCleanupAfterAFailedHelmUninstall(t *testing.T) {
	restCfg := apiServer(t)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	const ns = "cleanup-helm-failed"
	obj, cfg := installHooks(t, restCfg, ns, []string{"hooks-setup"}, withTimeout(2*time.Second))
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	_, err := dyn.Resource(configMaps).Namespace(ns).Patch(context.Background(), "hooks-cm", types.MergePatchType,
		[]byte(`{"metadata":{"finalizers":["cleanup.example.com/hold"]}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer removeFinalizers(t, dyn, configMaps, ns, "hooks-cm")

	_, err = Uninstall(context.Background(), cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{}))

	if err == nil {
		t.Fatal("the uninstall succeeded, want Helm's failure")
	}
	if errors.As(err, new(*HookCleanupError)) {
		t.Errorf("error %q passes for a failed cleanup only", err)
	}
	for _, want := range []string{"uninstallation completed with 1 error(s)", "no time left of the uninstall timeout to delete ConfigMap/" + ns + "/hooks-setup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	wantRecordsEnded(t, cfg, "hooks", false, 1)
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

// wantExists checks whether the ConfigMap, ServiceAccount or
// PersistentVolumeClaim "Kind/namespace/name", or the Namespace
// "Namespace/name", exists.
func wantExists(t *testing.T, cs kubernetes.Interface, id string, exists bool) {
	t.Helper()
	parts := strings.SplitN(id, "/", 3)
	ctx := context.Background()
	var err error
	switch {
	case parts[0] == "Namespace" && len(parts) == 2:
		_, err = cs.CoreV1().Namespaces().Get(ctx, parts[1], metav1.GetOptions{})
	case len(parts) != 3:
		t.Fatalf("wantExists: %s is not Kind/namespace/name", id)
	case parts[0] == "ConfigMap":
		_, err = cs.CoreV1().ConfigMaps(parts[1]).Get(ctx, parts[2], metav1.GetOptions{})
	case parts[0] == "ServiceAccount":
		_, err = cs.CoreV1().ServiceAccounts(parts[1]).Get(ctx, parts[2], metav1.GetOptions{})
	case parts[0] == "Secret":
		_, err = cs.CoreV1().Secrets(parts[1]).Get(ctx, parts[2], metav1.GetOptions{})
	case parts[0] == "PersistentVolumeClaim":
		_, err = cs.CoreV1().PersistentVolumeClaims(parts[1]).Get(ctx, parts[2], metav1.GetOptions{})
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

// hookRun is how far the run of a hook Job or Pod got.
type hookRun string

const (
	// runNotStarted leaves the status as the API server made it.
	runNotStarted hookRun = ""
	runRunning    hookRun = "running"
	runComplete   hookRun = "complete"
	runFailed     hookRun = "failed"
)

// setRun writes the status the Job controller or the kubelet would write
// for run on the Job or Pod ns/name; envtest runs neither. Other kinds
// have no run.
func setRun(t *testing.T, cs kubernetes.Interface, kind, ns, name string, run hookRun) {
	t.Helper()
	var err error
	switch {
	case run == runNotStarted:
	case kind == "Job":
		err = writeJobRun(context.Background(), cs, ns, name, run)
	case kind == "Pod":
		err = writePodRun(context.Background(), cs, ns, name, run)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// writeJobRun writes to the Job ns/name the status the Job controller
// writes for run. A start time already written is kept: the API server
// refuses to change it.
func writeJobRun(ctx context.Context, cs kubernetes.Interface, ns, name string, run hookRun) error {
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	started, now := metav1.NewTime(time.Now().Add(-time.Second)), metav1.Now()
	if job.Status.StartTime != nil {
		started = *job.Status.StartTime
	}
	switch run {
	case runRunning:
		job.Status = batchv1.JobStatus{StartTime: &started, Active: 1}
	case runComplete:
		job.Status = envtestserver.CompleteJobStatus()
	case runFailed:
		job.Status = batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
		}}
	}
	job.Status.StartTime = &started
	if _, err := cs.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking Job %s/%s %s: %w", ns, name, run, err)
	}
	return nil
}

// writePodRun writes to the Pod ns/name the phase its kubelet writes for
// run.
func writePodRun(ctx context.Context, cs kubernetes.Interface, ns, name string, run hookRun) error {
	pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pod.Status.Phase = map[hookRun]corev1.PodPhase{runRunning: corev1.PodRunning, runComplete: corev1.PodSucceeded, runFailed: corev1.PodFailed}[run]
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("marking Pod %s/%s %s: %w", ns, name, run, err)
	}
	return nil
}

// standInJobController plays the Job controller, which envtest does not
// run, for the Jobs of ns named in runs: each time one is created (Helm
// runs its hook), it writes the status of its run. It stops when the test
// ends.
func standInJobController(t *testing.T, cs kubernetes.Interface, ns string, runs map[string]hookRun) {
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		seen := map[types.UID]bool{}
		for {
			jobs, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			for _, job := range jobsOf(jobs, err) {
				run, ok := runs[job.Name]
				if !ok || seen[job.UID] {
					continue
				}
				seen[job.UID] = true
				if err := writeJobRun(ctx, cs, ns, job.Name, run); err != nil && ctx.Err() == nil {
					t.Errorf("stand-in Job controller: %v", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func jobsOf(list *batchv1.JobList, err error) []batchv1.Job {
	if err != nil || list == nil {
		return nil
	}
	return list.Items
}

// jobHooksChart is a chart with a ConfigMap of its own and a hook Job for
// each name, run for the event it maps to.
func jobHooksChart(jobs map[string]string) *chartv2.Chart {
	c := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "job-hooks", Version: "1.0.0"},
		Values:    map[string]any{"foo": "x"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(configMapTemplate)}},
	}
	for name, event := range jobs {
		c.Templates = append(c.Templates, &common.File{Name: "templates/" + name + ".yaml",
			Data: []byte(hookManifest("Job", "", name, map[string]string{"helm.sh/hook": event}))})
	}
	return c
}

// wantJob checks whether the Job ns/name exists.
func wantJob(t *testing.T, cs kubernetes.Interface, ns, name string, exists bool) {
	t.Helper()
	_, err := cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	switch {
	case exists && err != nil:
		t.Errorf("Job %s/%s: %v, want it left", ns, name, err)
	case !exists && !apierrors.IsNotFound(err):
		t.Errorf("Job %s/%s: %v, want it gone", ns, name, err)
	}
}

// runningJobLeft is the reason the cleanup gives for a hook Job left
// because it still runs.
const runningJobLeft = "a Job that is still running (1 active pods): deleting it would stop it halfway; left to finish"

// A hook Job that outlived its timeout still runs when the release is
// uninstalled (the HelmRelease deleted, a remediation). The hook cleanup
// deletes the finished hook Job and leaves the running one, which it names
// with the reason; the uninstall succeeds all the same. Upstream leaves
// both running.
func TestAgainstAPIServerARunningHookJobSurvivesHookCleanup(t *testing.T) {
	restCfg := apiServer(t)
	cs := kubernetes.NewForConfigOrDie(restCfg)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "cleanup-running-job"
	createNamespaces(t, cs, ns)
	standInJobController(t, cs, ns, map[string]hookRun{"hooks-seed": runComplete, "hooks-migrate": runRunning})
	obj := newHR(withTimeout(3*time.Second), func(o *v2.HelmRelease) {
		o.Name, o.Namespace = "hooks", ns
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
	})
	cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)), WithHookMarks(HookMarks(obj)))
	if err != nil {
		t.Fatal(err)
	}
	chart := jobHooksChart(map[string]string{"hooks-seed": "pre-install", "hooks-migrate": "post-install"})
	if _, err := Install(context.Background(), cfg, obj, chart, nil, planned(t, nil, obj, plan.Install, asked{})); err == nil {
		t.Fatal("the install succeeded, want its post-install hook timed out")
	}
	wantJob(t, cs, ns, "hooks-migrate", true)

	var deleted, left []string
	heard := hearing{hookResources: func(d, l []string) { deleted, left = d, l }}
	_, err = Uninstall(context.Background(), cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{observer: heard}))

	if err != nil {
		t.Fatalf("uninstall: %v, want it to succeed with the running hook Job left", err)
	}
	if want := []string{"Job/" + ns + "/hooks-seed"}; !slices.Equal(deleted, want) {
		t.Errorf("deleted %v, want %v", deleted, want)
	}
	if want := []string{"Job/" + ns + "/hooks-migrate (" + runningJobLeft + ")"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	wantJob(t, cs, ns, "hooks-migrate", true)
	wantJob(t, cs, ns, "hooks-seed", false)
	wantRecordsEnded(t, cfg, "hooks", false, 1)
}

// Helm's uninstall timed out on a post-delete hook Job, which runs on, and
// the controller stopped before the cleanup. The uninstall it resumes has
// a whole timeout for the cleanup, and still leaves the running Job.
func TestAgainstAPIServerARunningPostDeleteHookJobSurvivesTheResumedHookCleanup(t *testing.T) {
	restCfg := apiServer(t)
	cs := kubernetes.NewForConfigOrDie(restCfg)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "cleanup-running-post-delete"
	createNamespaces(t, cs, ns)
	standInJobController(t, cs, ns, map[string]hookRun{"hooks-teardown": runRunning})
	obj := newHR(withTimeout(30*time.Second), func(o *v2.HelmRelease) {
		o.Name, o.Namespace = "hooks", ns
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
	})
	cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)), WithHookMarks(HookMarks(obj)))
	if err != nil {
		t.Fatal(err)
	}
	chart := jobHooksChart(map[string]string{"hooks-teardown": "post-delete"})
	if _, err := Install(context.Background(), cfg, obj, chart, nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
		t.Fatalf("install: %v", err)
	}
	// What the stopped controller's Helm uninstall left.
	stopped := helmaction.NewUninstall(cfg)
	stopped.KeepHistory, stopped.Description = true, hookcleanup.PendingDescription
	stopped.WaitStrategy, stopped.Timeout = kube.StatusWatcherStrategy, 2*time.Second
	if _, err := stopped.Run("hooks"); err == nil {
		t.Fatal("Helm's uninstall succeeded, want its post-delete hook timed out")
	}
	if last, err := LastRelease(cfg, "hooks"); err != nil || !hookcleanup.Pending(last) {
		t.Fatalf("records after Helm's uninstall: %v, want the cleanup pending", err)
	}

	var left []string
	heard := hearing{hookResources: func(_, l []string) { left = l }}
	_, err = Uninstall(context.Background(), cfg, obj, planned(t, cfg, obj, plan.Uninstall, asked{observer: heard}))

	if err != nil {
		t.Fatalf("uninstall: %v, want it to succeed with the running hook Job left", err)
	}
	if want := []string{"Job/" + ns + "/hooks-teardown (" + runningJobLeft + ")"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	wantJob(t, cs, ns, "hooks-teardown", true)
	wantRecordsEnded(t, cfg, "hooks", false, 1)
}
