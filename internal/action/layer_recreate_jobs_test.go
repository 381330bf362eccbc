package action

import (
	"context"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/go-logr/logr/testr"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// finishJob marks the Job ns/name Complete, as the Job controller would.
func finishJob(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	envtestserver.FinishJob(t, cs, ns, name)
}

// recreateCluster returns a clientset and a Helm configuration factory of
// the shared API server, with the namespace ns.
func recreateCluster(t *testing.T, ns string) (kubernetes.Interface, *ConfigFactory) {
	t.Helper()
	restCfg := apiServer(t)
	cs := kubernetes.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, ns)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, factory
}

// noWaitRelease is the HelmRelease ns/name whose install, upgrade
// (with Helm's force when force) and rollback wait for nothing, and the
// Helm configuration of its namespace.
func noWaitRelease(t *testing.T, factory *ConfigFactory, ns, name string, force bool) (*v2.HelmRelease, *helmaction.Configuration) {
	t.Helper()
	obj := newHR(func(o *v2.HelmRelease) {
		o.Name, o.Namespace = name, ns
		o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
		o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true, Force: force}}
		o.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{DisableWait: true}}
	})
	cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)))
	if err != nil {
		t.Fatal(err)
	}
	return obj, cfg
}

// startJob marks the Job ns/name running with one active pod, as the Job
// controller would.
func startJob(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	ctx := context.Background()
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Started well before any time FinishJob would write, so that
	// finishing it must keep this start time (the API server refuses to
	// change it).
	started := metav1.NewTime(time.Now().Add(-2 * time.Minute))
	job.Status = batchv1.JobStatus{StartTime: &started, Active: 1}
	if _, err := cs.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking Job %s/%s running: %v", ns, name, err)
	}
}

// jobsChart has two plain Jobs, a and b, with the images values.a and
// values.b, both carrying values.annotations.
func jobsChart(version string) *chartv2.Chart {
	const job = `{{- range list "a" "b" }}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ $.Release.Name }}-{{ . }}
  annotations: {{- toYaml $.Values.annotations | nindent 4 }}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: run
          image: {{ index $.Values . }}
{{- end }}
`
	return &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "jobs", Version: version},
		Templates: []*common.File{{Name: "templates/jobs.yaml", Data: []byte(job)}},
	}
}

// jobUID reads the UID and image of the Job ns/name.
func jobUID(t *testing.T, cs kubernetes.Interface, ns, name string) (types.UID, string) {
	t.Helper()
	job, err := cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return job.UID, job.Spec.Template.Spec.Containers[0].Image
}

// A Job that has not finished is never recreated, whatever the consent:
// the upgrade fails naming it, and the next upgrade after it finished
// recreates it.
func TestAgainstAPIServerRecreateRunningJob(t *testing.T) {
	ctx := context.Background()
	const ns = "recreate-running"
	cs, factory := recreateCluster(t, ns)
	for _, tt := range []struct {
		name string
		gate bool
		ann  map[string]any
	}{
		{name: "gate", gate: true},
		{name: "annotated", ann: map[string]any{"helm.toolkit.fluxcd.io/force": "enabled"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, cfg := noWaitRelease(t, factory, ns, tt.name, false)
			opts := asked{config: Config{RecreateImmutable: tt.gate}}
			values := func(image string) map[string]any { return map[string]any{"image": image, "annotations": tt.ann} }
			if _, err := Install(ctx, cfg, obj, guardsChart("1.0.0"), values("migrate:1"), planned(t, nil, obj, plan.Install, opts)); err != nil {
				t.Fatalf("install: %v", err)
			}
			job := tt.name + "-migrate"
			uid, _ := jobUID(t, cs, ns, job)

			_, err := Upgrade(ctx, cfg, obj, guardsChart("1.1.0"), values("migrate:2"), planned(t, cfg, obj, plan.Upgrade, opts))
			if err == nil || !strings.Contains(err.Error(), "Job/"+ns+"/"+job+": spec.template") ||
				!strings.Contains(err.Error(), "not recreated: it is a Job that has not finished (neither Complete nor Failed)") {
				t.Fatalf("upgrade of a Job not started = %v, want it refused as not finished", err)
			}
			startJob(t, cs, ns, job)
			_, err = Upgrade(ctx, cfg, obj, guardsChart("1.1.0"), values("migrate:2"), planned(t, cfg, obj, plan.Upgrade, opts))
			if err == nil || !strings.Contains(err.Error(), "not recreated: it is a Job that is still running (1 active pods): recreating it would stop it halfway; it is recreated on the next attempt after it has finished") {
				t.Fatalf("upgrade of a running Job = %v, want it refused as running", err)
			}
			if now, image := jobUID(t, cs, ns, job); now != uid || image != "migrate:1" {
				t.Fatalf("the running Job was touched: same uid %v, image %s", now == uid, image)
			}

			finishJob(t, cs, ns, job)
			if _, err := Upgrade(ctx, cfg, obj, guardsChart("1.1.0"), values("migrate:2"), planned(t, cfg, obj, plan.Upgrade, opts)); err != nil {
				t.Fatalf("upgrade after the Job finished: %v", err)
			}
			if now, image := jobUID(t, cs, ns, job); now == uid || image != "migrate:2" {
				t.Errorf("after it finished: recreated %v, image %s; want recreated at migrate:2", now != uid, image)
			}
		})
	}
}

// Helm's force with client-side apply replaces every object with a PUT,
// which the API server refuses for a Job even when nothing changed (its
// selector and controller-uid labels are not in the manifest). With
// consent on every Job, upgrades that change no Job keep them all; one
// that changes a Job's template recreates that Job only. Server-side apply
// (force: conflicts) does the same.
func TestAgainstAPIServerRecreateForceKeepsUnchangedJobs(t *testing.T) {
	ctx := context.Background()
	const ns = "recreate-force"
	cs, factory := recreateCluster(t, ns)
	for _, tt := range []struct {
		name       string
		clientSide bool
		gate       bool
	}{
		{name: "csa", clientSide: true},
		{name: "csa-gate", clientSide: true, gate: true},
		{name: "ssa"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, cfg := noWaitRelease(t, factory, ns, tt.name, true)
			var heard []string
			opts := asked{config: Config{UseHelm3Defaults: tt.clientSide, RecreateImmutable: tt.gate},
				observer: hearing{recreated: func(r recreate.Recreated) { heard = append(heard, r.Object) }}}
			values := func(a, b string) map[string]any {
				v := map[string]any{"a": a, "b": b}
				if !tt.gate {
					v["annotations"] = map[string]any{"helm.toolkit.fluxcd.io/force": "enabled"}
				}
				return v
			}
			if _, err := Install(ctx, cfg, obj, jobsChart("1.0.0"), values("a:1", "b:1"), planned(t, nil, obj, plan.Install, opts)); err != nil {
				t.Fatalf("install: %v", err)
			}
			a, b := tt.name+"-a", tt.name+"-b"
			finishJob(t, cs, ns, a)
			finishJob(t, cs, ns, b)
			uidA, _ := jobUID(t, cs, ns, a)
			uidB, _ := jobUID(t, cs, ns, b)
			for i, version := range []string{"1.0.1", "1.0.2"} {
				if _, err := Upgrade(ctx, cfg, obj, jobsChart(version), values("a:1", "b:1"), planned(t, cfg, obj, plan.Upgrade, opts)); err != nil {
					t.Fatalf("upgrade %d that changes no Job: %v", i+1, err)
				}
				nowA, _ := jobUID(t, cs, ns, a)
				nowB, _ := jobUID(t, cs, ns, b)
				if nowA != uidA || nowB != uidB || len(heard) > 0 {
					t.Fatalf("upgrade %d that changes no Job: a recreated %v, b recreated %v, heard %v", i+1, nowA != uidA, nowB != uidB, heard)
				}
			}
			if _, err := Upgrade(ctx, cfg, obj, jobsChart("1.1.0"), values("a:1", "b:2"), planned(t, cfg, obj, plan.Upgrade, opts)); err != nil {
				t.Fatalf("upgrade that changes b: %v", err)
			}
			nowA, _ := jobUID(t, cs, ns, a)
			nowB, imageB := jobUID(t, cs, ns, b)
			if nowA != uidA || nowB == uidB || imageB != "b:2" {
				t.Errorf("upgrade that changes b: a recreated %v, b recreated %v at %s; want only b", nowA != uidA, nowB != uidB, imageB)
			}
			if len(heard) != 1 || heard[0] != "Job/"+ns+"/"+b {
				t.Errorf("observer heard %v, want only Job/%s/%s", heard, ns, b)
			}
		})
	}
}

// A rollback may recreate what the revision it rolls back from consented
// to: v2 adds the annotation and changes the Job, the rollback to v1
// (without it) brings the v1 Job back.
func TestAgainstAPIServerRecreateRollbackOfAConsentingRevision(t *testing.T) {
	ctx := context.Background()
	const ns = "recreate-rollback"
	cs, factory := recreateCluster(t, ns)
	obj, cfg := noWaitRelease(t, factory, ns, "shop", false)
	if _, err := Install(ctx, cfg, obj, guardsChart("1.0.0"), map[string]any{"image": "migrate:1"}, planned(t, nil, obj, plan.Install, asked{})); err != nil {
		t.Fatalf("install: %v", err)
	}
	finishJob(t, cs, ns, "shop-migrate")
	v2Values := map[string]any{"image": "migrate:2", "annotations": map[string]any{"helm.toolkit.fluxcd.io/force": "enabled"}}
	if _, err := Upgrade(ctx, cfg, obj, guardsChart("2.0.0"), v2Values, planned(t, cfg, obj, plan.Upgrade, asked{})); err != nil {
		t.Fatalf("upgrade to v2: %v", err)
	}
	finishJob(t, cs, ns, "shop-migrate")
	uid2, _ := jobUID(t, cs, ns, "shop-migrate")
	if err := Rollback(ctx, cfg, obj, 1, planned(t, cfg, obj, plan.Rollback, asked{})); err != nil {
		t.Fatalf("rollback to v1: %v", err)
	}
	if uid, image := jobUID(t, cs, ns, "shop-migrate"); uid == uid2 || image != "migrate:1" {
		t.Errorf("after the rollback: recreated %v, image %s; want the v1 Job back", uid != uid2, image)
	}
}

// Whatever depends on a built-in object, except what the new object makes
// again by itself, stops its recreate: a custom resource owned by a Job
// blocks it and is named; the Job's own pods do not.
func TestAgainstAPIServerRecreateBuiltInOwner(t *testing.T) {
	ctx := context.Background()
	const ns = "recreate-owner"
	cs, factory := recreateCluster(t, ns)
	restCfg := apiServer(t)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	databaseCRD(t, restCfg)
	for _, tt := range []struct {
		name    string
		owned   string // "database" or "pod"
		wantErr string
	}{
		{name: "owns-database", owned: "database",
			wantErr: "Job/recreate-owner/owns-database-migrate: spec.template: field is immutable; not recreated: it owns Database/recreate-owner/owns-database-db, which a recreate would delete with it (a new Job makes again only its Pods)"},
		{name: "owns-pod", owned: "pod"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, cfg := noWaitRelease(t, factory, ns, tt.name, false)
			values := func(image string) map[string]any {
				return map[string]any{"image": image, "annotations": map[string]any{"helm.toolkit.fluxcd.io/force": "enabled"}}
			}
			if _, err := Install(ctx, cfg, obj, guardsChart("1.0.0"), values("migrate:1"), planned(t, nil, obj, plan.Install, asked{})); err != nil {
				t.Fatalf("install: %v", err)
			}
			job := tt.name + "-migrate"
			finishJob(t, cs, ns, job)
			uid, _ := jobUID(t, cs, ns, job)
			owner := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, UID: uid}}
			switch tt.owned {
			case "database":
				db := &unstructured.Unstructured{}
				db.SetGroupVersionKind(databases.GroupVersion().WithKind("Database"))
				db.SetName(tt.name + "-db")
				db.SetOwnerReferences(owner)
				if _, err := dyn.Resource(databases).Namespace(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			case "pod":
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: job + "-x", OwnerReferences: owner},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "run", Image: "migrate:1"}}}}
				if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Upgrade(ctx, cfg, obj, guardsChart("1.1.0"), values("migrate:2"), planned(t, cfg, obj, plan.Upgrade, asked{}))
			now, _ := jobUID(t, cs, ns, job)
			if tt.wantErr == "" {
				if err != nil || now == uid {
					t.Fatalf("upgrade = %v, recreated %v; want the Job recreated", err, now != uid)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || now != uid {
				t.Fatalf("upgrade = %v (recreated %v), want it refused with %q", err, now != uid, tt.wantErr)
			}
		})
	}
}
