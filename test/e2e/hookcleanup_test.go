package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// hookLeftoversChart has a release ConfigMap and one hook of each kind an
// uninstall may leave behind; see its Chart.yaml.
const hookLeftoversChart = "hook-leftovers"

// hookRelease is the Helm release name the tests install the chart as; the
// chart names its objects after it.
const hookRelease = "hooks"

// leftover is one object of the chart (or the test) and whether it must
// still exist after the uninstall.
type leftover struct {
	kind string // Job, ConfigMap, Secret, PersistentVolumeClaim or Namespace
	name string // without the release prefix (a Namespace's: without "<namespace>-<release>-")
	stay bool
}

// TestHookCleanup uninstalls a release whose hooks left objects behind,
// once as Helm does it and once with spec.uninstall.deleteHookResources.
// The cluster's garbage collector removes the pods of deleted Jobs.
func TestHookCleanup(t *testing.T) {
	t.Parallel()

	// What Helm v4's uninstall does with hook objects: it deletes the
	// release's manifest only. Hooks are not in it, so every hook object
	// without a delete policy that fired stays, whichever event it ran for,
	// including the pre- and post-delete hooks the uninstall itself ran
	// (their default policy, before-hook-creation, only deletes an old copy
	// before a new one is created). A hook whose only policy is hook-failed
	// stays once it succeeded. Only hook-succeeded hooks are gone, deleted
	// by Helm right after they ran. A Job's pods stay with their Job.
	t.Run("helm-default-leaves-hooks", func(t *testing.T) {
		t.Parallel()
		ns := uninstallHookLeftovers(t, nil)
		wantLeftovers(t, ns, hookObjects()) // only the release's own ConfigMap and the hook-succeeded Job go
		wantRivalHook(t, ns)
		env.WantNoEvent(t, ns, hookRelease, framework.EventWant{Reason: hookResourcesDeletedReason})
		env.WantNoEvent(t, ns, hookRelease, framework.EventWant{Reason: hookResourcesLeftReason})
	})

	// With deleteHookResources alone the uninstall deletes the hook Jobs
	// (with their pods) without a delete policy that this release's hooks
	// created, the pre-delete one it just ran included: the kinds that
	// hold no data. The hook Secret with the generated password stays, and
	// so do the hook ConfigMaps, reported with the field that would list
	// their kind.
	t.Run("delete-hook-resources-keeps-data", func(t *testing.T) {
		t.Parallel()
		ns := uninstallHookLeftovers(t, func(hr *v2.HelmRelease) {
			hr.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
		})
		wantLeftovers(t, ns, hookObjects("Job/post-install", "Job/pre-upgrade", "Job/failed-policy", "Job/pre-delete"))
		env.WaitEvent(t, ns, hookRelease, framework.EventWant{
			Reason:   hookResourcesDeletedReason,
			Contains: "Deleted 4 object(s) left by the hooks of release " + hookRelease,
		})
		// The event names only the first five; the reason given for the
		// Secret is checked against the API server in internal/action.
		env.WaitEvent(t, ns, hookRelease, framework.EventWant{
			Reason:   hookResourcesLeftReason,
			Contains: "Left 8 object(s) found under the names of the hooks of release " + hookRelease,
		})
		env.WantNoEvent(t, ns, hookRelease, framework.EventWant{Reason: hookCleanupFailedReason})
	})

	// With deleteHookResourceKinds listing ConfigMap and Secret the
	// uninstall also deletes the hook objects of those kinds, the Secret
	// with the password included. These stay, and are reported: the hook
	// the chart keeps, the hook Namespace and PersistentVolumeClaim, the
	// ConfigMap that only shares a hook's name, and another release's hook
	// of the same name as one of this release's.
	t.Run("delete-hook-resources-of-listed-kinds", func(t *testing.T) {
		t.Parallel()
		ns := uninstallHookLeftovers(t, func(hr *v2.HelmRelease) {
			hr.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true, DeleteHookResourceKinds: []string{"ConfigMap", "Secret"}}
		})
		wantLeftovers(t, ns, hookObjects("Job/post-install", "Job/pre-upgrade", "Job/failed-policy", "Job/pre-delete",
			"ConfigMap/pre-install", "Secret/password", "ConfigMap/post-delete"))
		wantRivalHook(t, ns)
		env.WaitEvent(t, ns, hookRelease, framework.EventWant{
			Reason:   hookResourcesDeletedReason,
			Contains: "Deleted 7 object(s) left by the hooks of release " + hookRelease,
		})
		left := env.WaitEvent(t, ns, hookRelease, framework.EventWant{
			Reason:   hookResourcesLeftReason,
			Contains: "Left 5 object(s) found under the names of the hooks of release " + hookRelease,
		})
		for _, want := range []string{
			"ConfigMap/" + ns + "/hooks-keep (helm.sh/resource-policy: keep)",
			"ConfigMap/" + ns + "/hooks-transient (not a hook object)",
			"PersistentVolumeClaim/" + ns + "/hooks-data (a PersistentVolumeClaim is never deleted)",
			"Namespace/" + hookNamespace(ns) + " (a Namespace is never deleted)",
			"ConfigMap/" + ns + "/" + sharedHook + " (created by the hooks of release " + ns + "/" + rivalRelease + ")",
		} {
			if !strings.Contains(left.Message, want) {
				t.Errorf("%s event %q does not name %q", hookResourcesLeftReason, left.Message, want)
			}
		}
		env.WantNoEvent(t, ns, hookRelease, framework.EventWant{Reason: hookCleanupFailedReason})
	})
}

// The controller's event reasons for deleteHookResources.
const (
	hookResourcesDeletedReason = "HookResourcesDeleted"
	hookResourcesLeftReason    = "HookResourcesLeft"
	hookCleanupFailedReason    = "HookCleanupFailed"
)

// The rival: another release, of the hook-rival chart, whose one hook has
// the name of one of the release under test's hooks, sharedHook.
const (
	hookRivalChart = "hook-rival"
	rivalRelease   = "rival"
	sharedHook     = "shared-hook"
)

// hookNamespace is the name of the chart's hook Namespace.
func hookNamespace(ns string) string { return ns + "-" + hookRelease + "-ns" }

// wantRivalHook checks that sharedHook is the rival release's object.
func wantRivalHook(t *testing.T, ns string) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := env.Get(context.Background(), &cm, ns, sharedHook); err != nil {
		t.Errorf("the rival's hook %s: %v, want it left", sharedHook, err)
		return
	}
	if cm.Data["owner"] != rivalRelease {
		t.Errorf("hook %s made by %q, want the rival's", sharedHook, cm.Data["owner"])
	}
}

// uninstallHookLeftovers installs the hook-leftovers chart in a namespace
// of its own, as configure (may be nil) changes it, upgrades it once
// (running the pre-upgrade hook), installs the rival release (whose hook
// replaces the chart's sharedHook: Helm's before-hook-creation), creates a
// ConfigMap outside the release, deletes the HelmRelease and waits until
// it is gone, which is after the uninstall. It returns the namespace.
//
// The outside ConfigMap has the name of the post-install hook ConfigMap
// that Helm deleted right after creating it (hook-succeeded), so that the
// release records list a hook of that kind, namespace and name: it is not a
// hook (it has no helm.sh/hook annotation) and must never be deleted.
func uninstallHookLeftovers(t *testing.T, configure func(*v2.HelmRelease)) string {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, hookLeftoversChart, "0.1.0", ns)
	// Published with the first, so that the repository's index has it.
	rivalRef := env.PublishChart(t, hookRivalChart, "0.1.0", ns)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hookNamespace(ns)}})
	})
	hr := framework.WithWaitStrategy(framework.Release(ns, hookRelease, repo.Name, ref.Name, ref.Version, `{"sharedHook":"`+sharedHook+`"}`), v2.BeforeHooks, time.Minute)
	hr.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
	if configure != nil {
		configure(hr)
	}
	env.Create(t, hr)

	framework.Step(t, "install and upgrade", func(t *testing.T) {
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.Values = framework.JSON(`{"message":"two","sharedHook":"` + sharedHook + `"}`)
		})
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
		for _, name := range []string{"post-install", "pre-upgrade", "failed-policy"} {
			wantJobSucceeded(t, ns, hookRelease+"-"+name)
		}
		for _, name := range []string{"pre-install", "keep"} {
			if err := env.Get(ctx, &corev1.ConfigMap{}, ns, hookRelease+"-"+name); err != nil {
				t.Errorf("hook ConfigMap %s after the upgrade: %v", name, err)
			}
		}
		env.Eventually(t, 30*time.Second, "hook-succeeded ConfigMap deleted by Helm", func(ctx context.Context) error {
			return env.Gone(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookRelease + "-transient"}})
		})
	})

	framework.Step(t, "another release's hook of the same name", func(t *testing.T) {
		rival := framework.Release(ns, rivalRelease, repo.Name, rivalRef.Name, rivalRef.Version, `{"hookName":"`+sharedHook+`"}`)
		if configure != nil {
			configure(rival)
		}
		env.Create(t, rival)
		env.WaitRelease(t, rival, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
		wantRivalHook(t, ns)
	})

	outside := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hookRelease + "-transient"},
		Data:       map[string]string{"owner": "not the release"},
	}
	env.Create(t, outside)

	framework.Step(t, "uninstall", func(t *testing.T) {
		if err := env.Client.Delete(ctx, hr); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, 2*time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
		if stored := env.Storage(t, ns, hookRelease); len(stored) != 0 {
			t.Errorf("Helm storage after the uninstall: %s, want none", framework.Describe(stored))
		}
	})
	return ns
}

// hookObjects lists the objects of the chart (and the test's transient
// ConfigMap) that wantLeftovers checks: the release's own ConfigMap and the
// hook-succeeded Job are gone after any uninstall, those named in gone
// ("Kind/name") too, and every other stays.
func hookObjects(gone ...string) []leftover {
	all := []leftover{
		{kind: "ConfigMap", name: "app"}, {kind: "Job", name: "succeeded"},
		{kind: "Job", name: "post-install"}, {kind: "Job", name: "pre-upgrade"},
		{kind: "Job", name: "failed-policy"}, {kind: "Job", name: "pre-delete"},
		{kind: "ConfigMap", name: "pre-install"}, {kind: "Secret", name: "password"},
		{kind: "ConfigMap", name: "post-delete"}, {kind: "ConfigMap", name: "keep"},
		{kind: "ConfigMap", name: "transient"}, // the test's own, see uninstallHookLeftovers
		{kind: "PersistentVolumeClaim", name: "data"}, {kind: "Namespace", name: "ns"},
	}
	for i := range all {
		id := all[i].kind + "/" + all[i].name
		all[i].stay = i > 1 && !slices.Contains(gone, id)
	}
	return all
}

// wantLeftovers checks each object after the uninstall: those that stay
// exist (a Job with its succeeded pods), the others are gone (a Job's pods
// too, removed by the garbage collector).
func wantLeftovers(t *testing.T, ns string, objects []leftover) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objects {
		name, objNS := hookRelease+"-"+o.name, ns
		if o.kind == "Namespace" {
			name, objNS = hookNamespace(ns), ""
		}
		obj := leftoverObject(o.kind, ns, name)
		if o.stay {
			if err := env.Get(ctx, obj, objNS, name); err != nil {
				t.Errorf("%s %s after the uninstall: %v, want it left", o.kind, name, err)
				continue
			}
			if o.kind == "Job" {
				if pods := jobPods(t, ns, name); len(pods) == 0 {
					t.Errorf("Job %s left without its pods", name)
				}
			}
			continue
		}
		env.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s gone", o.kind, name), func(ctx context.Context) error {
			if err := env.Gone(ctx, obj); err != nil {
				return err
			}
			if o.kind == "Job" {
				if pods := jobPods(t, ns, name); len(pods) > 0 {
					return fmt.Errorf("%d pods of Job %s left", len(pods), name)
				}
			}
			return nil
		})
	}
}

func leftoverObject(kind, ns, name string) client.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: name}
	switch kind {
	case "Job":
		return &batchv1.Job{ObjectMeta: meta}
	case "PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{ObjectMeta: meta}
	case "Namespace":
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	case "Secret":
		return &corev1.Secret{ObjectMeta: meta}
	}
	return &corev1.ConfigMap{ObjectMeta: meta}
}

// jobPods lists the pods the Job controller made for the Job name.
func jobPods(t *testing.T, ns, name string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err != nil {
		t.Fatalf("listing pods of Job %s: %v", name, err)
	}
	return pods.Items
}

// wantJobSucceeded checks that the hook Job name ran to completion.
func wantJobSucceeded(t *testing.T, ns, name string) {
	t.Helper()
	var job batchv1.Job
	if err := env.Get(context.Background(), &job, ns, name); err != nil {
		t.Errorf("hook Job %s: %v", name, err)
		return
	}
	if job.Status.Succeeded < 1 {
		t.Errorf("hook Job %s: %d pods succeeded, want 1", name, job.Status.Succeeded)
	}
}
