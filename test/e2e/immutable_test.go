package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// immutableChart has a plain migration Job, an app, a Service and an
// optional StatefulSet whose immutable fields follow values.
const immutableChart = "immutable-app"

// immutableRelease publishes the chart in a new namespace and returns a
// HelmRelease "imm" of it with values (JSON) under strategy; not created.
func immutableRelease(t *testing.T, values string, strategy v2.HookWaitStrategy) (string, *v2.HelmRelease) {
	t.Helper()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, immutableChart, "0.1.0", ns)
	hr := framework.WithWaitStrategy(framework.Release(ns, "imm", repo.Name, ref.Name, ref.Version, values), strategy, 90*time.Second)
	return ns, hr
}

// uidOf reads the UID of the object obj names (namespace and name set).
func uidOf(t *testing.T, obj client.Object) types.UID {
	t.Helper()
	if err := env.Get(context.Background(), obj, obj.GetNamespace(), obj.GetName()); err != nil {
		t.Fatalf("reading %T %s: %v", obj, obj.GetName(), err)
	}
	return obj.GetUID()
}

func named[T client.Object](obj T, ns, name string) T {
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}

// setValues replaces the HelmRelease's values, which upgrades it.
func setValues(t *testing.T, hr *v2.HelmRelease, values string) {
	t.Helper()
	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(values) })
}

// wantMigrated checks that the migration Job runs the image of version and
// completed.
func wantMigrated(t *testing.T, ns, version string) {
	t.Helper()
	env.Eventually(t, time.Minute, "migration "+version+" completed", func(ctx context.Context) error {
		job := &batchv1.Job{}
		if err := env.Get(ctx, job, ns, "imm-migrate"); err != nil {
			return err
		}
		if img := job.Spec.Template.Spec.Containers[0].Image; img != "example.com/migrate:"+version {
			return fmt.Errorf("image %s", img)
		}
		if job.Status.Succeeded < 1 {
			return fmt.Errorf("not completed: %+v", job.Status)
		}
		return nil
	})
}

// TestImmutableMigrationJob upgrades a chart whose migration is a plain
// Job to a new image: refused and named without the annotation; with it
// the Job alone is recreated, under each wait strategy and in order.
func TestImmutableMigrationJob(t *testing.T) {
	t.Parallel()

	t.Run("without-annotation-upgrade-fails", func(t *testing.T) {
		t.Parallel()
		ns, hr := immutableRelease(t, `{"migrateVersion":"1"}`, v2.BeforeHooks)
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
		job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))

		setValues(t, hr, `{"migrateVersion":"2"}`)
		waitCondition(t, hr, 2*time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
			"Job/"+ns+"/imm-migrate: spec.template: field is immutable; annotate it helm.toolkit.fluxcd.io/force: enabled (or turn on the RecreateImmutableResources feature gate) to let the controller recreate it")
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.UpgradeFailedReason,
			Contains: "Job/" + ns + "/imm-migrate: spec.template: field is immutable"})
		if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) != job {
			t.Error("the Job was recreated without the annotation")
		}
		if env.HasEvent(t, ns, hr.Name, framework.ResourceRecreatedReason) {
			t.Errorf("%s event without the annotation", framework.ResourceRecreatedReason)
		}
	})

	for _, tc := range everyWaitMethod {
		t.Run("annotated-recreated-"+tc.name, func(t *testing.T) {
			t.Parallel()
			ns, hr := immutableRelease(t, `{"migrateVersion":"1","force":{"migrate":"enabled"}}`, tc.strategy)
			tc.orderIfAsked(hr)
			env.Create(t, hr)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			wantMigrated(t, ns, "1")
			others := []client.Object{
				named(&appsv1.Deployment{}, ns, "imm-app"),
				named(&corev1.ConfigMap{}, ns, "imm-settings"),
				named(&corev1.Service{}, ns, "imm-web"),
			}
			before := map[string]types.UID{}
			for _, o := range others {
				before[fmt.Sprintf("%T", o)] = uidOf(t, o)
			}
			job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))

			setValues(t, hr, `{"migrateVersion":"2","force":{"migrate":"enabled"}}`)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 2 * time.Minute})
			wantMigrated(t, ns, "2")
			if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) == job {
				t.Error("the Job kept its uid: not recreated")
			}
			for _, o := range others {
				if uidOf(t, o) != before[fmt.Sprintf("%T", o)] {
					t.Errorf("%T %s was recreated; only the Job may be", o, o.GetName())
				}
			}
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: framework.ResourceRecreatedReason,
				Contains: "Job/" + ns + "/imm-migrate recreated: the cluster refused to update it in place (spec.template: field is immutable)"})
			if tc.ordered {
				// The app's group is applied after the recreated Job
				// completed. Nothing depends on the app, so its own
				// readiness is not awaited as a batch (HIP-0025).
				wantGroupEventOrder(t, ns, hr.Name,
					groupEvent{framework.ResourceGroupReadyReason, "migrate (1/"},
					groupEvent{framework.ResourceGroupAppliedReason, "app (2/"})
			}
		})
	}
}

// TestImmutableServiceAndStatefulSet turns a headless Service into a
// NodePort one (a cluster IP must be allocated) and changes a
// StatefulSet's volumeClaimTemplates: both recreated, the StatefulSet's
// pod and its PersistentVolumeClaim kept.
func TestImmutableServiceAndStatefulSet(t *testing.T) {
	t.Parallel()
	const force = `"force":{"service":"enabled","db":"enabled"}`
	ns, hr := immutableRelease(t, `{"headless":true,"db":{"enabled":true,"storage":"1Gi"},`+force+`}`, v2.BeforeHooks)
	manualVolume(t, ns)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 2 * time.Minute})

	svc := uidOf(t, named(&corev1.Service{}, ns, "imm-web"))
	sts := uidOf(t, named(&appsv1.StatefulSet{}, ns, "imm-db"))
	pod := uidOf(t, named(&corev1.Pod{}, ns, "imm-db-0"))
	pvc := uidOf(t, named(&corev1.PersistentVolumeClaim{}, ns, "data-imm-db-0"))

	setValues(t, hr, `{"headless":false,"db":{"enabled":true,"storage":"2Gi"},`+force+`}`)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 2 * time.Minute})

	s := named(&corev1.Service{}, ns, "imm-web")
	if uidOf(t, s) == svc || s.Spec.Type != corev1.ServiceTypeNodePort || s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Errorf("Service: recreated %v, type %s, clusterIP %q; want a recreated NodePort Service with a cluster IP", s.UID != svc, s.Spec.Type, s.Spec.ClusterIP)
	}
	st := named(&appsv1.StatefulSet{}, ns, "imm-db")
	if uidOf(t, st) == sts {
		t.Error("the StatefulSet kept its uid: not recreated")
	} else if got := st.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("volumeClaimTemplates storage %s, want 2Gi", got.String())
	}
	if uidOf(t, named(&corev1.Pod{}, ns, "imm-db-0")) != pod {
		t.Error("the StatefulSet's pod was replaced; want it orphaned and adopted")
	}
	if uidOf(t, named(&corev1.PersistentVolumeClaim{}, ns, "data-imm-db-0")) != pvc {
		t.Error("the StatefulSet's PersistentVolumeClaim was replaced")
	}
	env.Eventually(t, time.Minute, "pod adopted by the new StatefulSet", func(ctx context.Context) error {
		p := &corev1.Pod{}
		if err := env.Get(ctx, p, ns, "imm-db-0"); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != st.UID {
			return fmt.Errorf("controller %+v, want StatefulSet %s", ref, st.UID)
		}
		return nil
	})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceRecreatedReason,
		Contains: "Service/" + ns + "/imm-web recreated"})
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceRecreatedReason,
		Contains: "StatefulSet/" + ns + "/imm-db recreated: the cluster refused to update it in place (spec: Forbidden"})
}

// manualVolume creates a PersistentVolume of the chart's storage class for
// the StatefulSet in ns to claim (the test cluster has no provisioner).
func manualVolume(t *testing.T, ns string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "e2e-manual",
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("5Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "data-imm-db-0"},
		},
	}
	env.Create(t, pv)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
}

// TestImmutableThirdPartyChart adds the annotation to podinfo through a
// post renderer, then changes its Deployment's selector (as a chart
// release renaming its labels would): the Deployment is recreated.
func TestImmutableThirdPartyChart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
	annotate := kustomize.Patch{Target: &kustomize.Selector{Kind: "Deployment", Name: "podinfo"},
		Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\n  annotations:\n    helm.toolkit.fluxcd.io/force: enabled\n"}
	hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{annotate}}}}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	d := named(&appsv1.Deployment{}, ns, "podinfo")
	before := uidOf(t, d)
	if d.Annotations["helm.toolkit.fluxcd.io/force"] != "enabled" {
		t.Fatalf("annotations %v: the post renderer did not annotate the Deployment", d.Annotations)
	}

	relabel := kustomize.Patch{Target: &kustomize.Selector{Kind: "Deployment", Name: "podinfo"},
		Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: podinfo\nspec:\n  selector:\n    matchLabels:\n      e2e.afterhooks.io/tier: web\n  template:\n    metadata:\n      labels:\n        e2e.afterhooks.io/tier: web\n"}
	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
		hr.Spec.PostRenderers[0].Kustomize.Patches = append(hr.Spec.PostRenderers[0].Kustomize.Patches, relabel)
	})
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 2 * time.Minute})
	if uidOf(t, d) == before || d.Spec.Selector.MatchLabels["e2e.afterhooks.io/tier"] != "web" {
		t.Errorf("Deployment recreated %v, selector %v; want a recreated Deployment with the new selector", d.UID != before, d.Spec.Selector.MatchLabels)
	}
	env.WantDeploymentAvailable(t, ns, "podinfo")
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceRecreatedReason,
		Contains: "Deployment/" + ns + "/podinfo recreated: the cluster refused to update it in place (spec.selector"})
}

// TestImmutableDriftCorrection replaces the migration Job by hand with
// another image (the only way its pod template can drift): drift
// correction recreates it from the release's manifest.
func TestImmutableDriftCorrection(t *testing.T) {
	t.Parallel()
	ns, hr := immutableRelease(t, `{"migrateVersion":"1","force":{"migrate":"enabled"}}`, v2.BeforeHooks)
	hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")

	ctx := context.Background()
	if err := env.Client.Delete(ctx, named(&batchv1.Job{}, ns, "imm-migrate"), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	handMade := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "imm-migrate", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "migrate", Image: "example.com/migrate:hand-made"}},
		}}},
	}
	env.Eventually(t, time.Minute, "hand-made Job created", func(ctx context.Context) error {
		return env.Client.Create(ctx, handMade.DeepCopy())
	})
	handMadeUID := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))
	// A recreate never stops a Job that has not finished.
	env.Eventually(t, time.Minute, "hand-made Job finished", func(ctx context.Context) error {
		job := &batchv1.Job{}
		if err := env.Get(ctx, job, ns, "imm-migrate"); err != nil {
			return err
		}
		if job.Status.Succeeded < 1 {
			return fmt.Errorf("not finished: %+v", job.Status)
		}
		return nil
	})

	env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceRecreatedReason,
		Contains: "Job/" + ns + "/imm-migrate recreated"})
	if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) == handMadeUID {
		t.Error("the hand-made Job is still there")
	}
	wantMigrated(t, ns, "1")
	if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
		t.Fatal(err)
	}
	if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionTrue, ""); err != nil {
		t.Error(err)
	}
}

// TestRecreateImmutableResourcesGate runs a controller with the gate: an
// unannotated Job is recreated, one annotated disabled is not.
func TestRecreateImmutableResourcesGate(t *testing.T) {
	t.Parallel()
	ns, repo, ref, ctl := gatedImmutableChart(t, "recreate")
	release := func(name, force string) *v2.HelmRelease {
		values := `{"migrateVersion":"1","force":{"migrate":"` + force + `"}}`
		hr := framework.Sharded(framework.WithWaitStrategy(framework.Release(ns, name, repo.Name, ref.Name, ref.Version, values), v2.BeforeHooks, 90*time.Second), ctl)
		env.Create(t, hr)
		return hr
	}
	unannotated, optedOut := release("gate", ""), release("optout", "disabled")
	for _, hr := range []*v2.HelmRelease{unannotated, optedOut} {
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	}
	gateJob := uidOf(t, named(&batchv1.Job{}, ns, "gate-migrate"))
	optOutJob := uidOf(t, named(&batchv1.Job{}, ns, "optout-migrate"))

	setValues(t, unannotated, `{"migrateVersion":"2"}`)
	setValues(t, optedOut, `{"migrateVersion":"2","force":{"migrate":"disabled"}}`)
	env.WaitRelease(t, unannotated, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 2 * time.Minute})
	if uidOf(t, named(&batchv1.Job{}, ns, "gate-migrate")) == gateJob {
		t.Error("the gate did not recreate the unannotated Job")
	}
	waitCondition(t, optedOut, 2*time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"Job/"+ns+"/optout-migrate", "spec.template", "opts out of recreation (helm.toolkit.fluxcd.io/force: disabled)")
	if uidOf(t, named(&batchv1.Job{}, ns, "optout-migrate")) != optOutJob {
		t.Error("the Job that opted out was recreated")
	}
}

// waitMethod is one way a release waits for its objects: a hook order,
// ordered batches on top of it or not.
type waitMethod struct {
	name     string
	strategy v2.HookWaitStrategy
	ordered  bool
}

// everyWaitMethod is beforeHooks, afterHooks and ordered.
var everyWaitMethod = []waitMethod{
	{name: "beforeHooks", strategy: v2.BeforeHooks},
	{name: "afterHooks", strategy: v2.AfterHooks},
	{name: "ordered", strategy: v2.BeforeHooks, ordered: true},
}

// orderIfAsked applies the release's objects in ordered batches when the
// method is ordered.
func (m waitMethod) orderIfAsked(hr *v2.HelmRelease) {
	if m.ordered {
		hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	}
}

// gatedImmutableChart is a fresh namespace with a HelmRepository serving
// the immutable test chart, and a controller of its own (shard named
// after prefix) started with the RecreateImmutableResources gate.
func gatedImmutableChart(t *testing.T, prefix string) (string, *sourcev1.HelmRepository, chartserver.ChartRef, *framework.Controller) {
	t.Helper()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, immutableChart, "0.1.0", ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{
		Shard: prefix + "-" + rand.String(8),
		Args:  []string{"--feature-gates=RecreateImmutableResources=true"},
	})
	return ns, repo, ref, ctl
}
