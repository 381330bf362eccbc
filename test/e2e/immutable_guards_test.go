package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/databasecrd"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// crChart has a Database custom resource whose spec.size a CRD validation
// rule makes immutable (test/databasecrd).
const crChart = "immutable-cr"

// crRelease publishes the chart in ns and returns a HelmRelease "cr" of
// it with values (JSON); not created.
func crRelease(t *testing.T, ns, values string) *v2.HelmRelease {
	t.Helper()
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, crChart, "0.1.0", ns)
	return framework.WithWaitStrategy(framework.Release(ns, "cr", repo.Name, ref.Name, ref.Version, values), v2.BeforeHooks, 90*time.Second)
}

// TestImmutableCustomResource upgrades a Database whose size its CRD makes
// immutable and under which an operator created a PersistentVolumeClaim
// (an ownerReference to it). Neither force: true nor the gate may delete
// it: the upgrade fails as upstream's does, and both keep their uids.
// The annotation consents, but the claim stops the recreate; without a
// dependent the annotated Database is recreated.
func TestImmutableCustomResource(t *testing.T) {
	t.Parallel()
	env.DatabaseCRD(t)
	for _, tc := range []struct {
		name      string
		gate      bool
		force     bool
		annotated bool
		claim     bool
		// want is what the Ready=False/UpgradeFailed message holds
		// beyond the object and field; empty: recreated.
		want string
	}{
		{name: "force", force: true, claim: true, want: "not recreated: it owns PersistentVolumeClaim/%s/cr-data"},
		{name: "gate", gate: true, claim: true, want: "not recreated: it owns PersistentVolumeClaim/%s/cr-data"},
		{name: "annotated", annotated: true, claim: true,
			want: "not recreated: it owns PersistentVolumeClaim/%s/cr-data, whose data a recreate would delete"},
		{name: "force-no-dependents", force: true, want: "annotate it helm.toolkit.fluxcd.io/force: enabled to let the controller recreate it"},
		{name: "annotated-no-dependents", annotated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			annotations := `{}`
			if tc.annotated {
				annotations = `{"helm.toolkit.fluxcd.io/force":"enabled"}`
			}
			hr := crRelease(t, ns, `{"size":"1Gi","annotations":`+annotations+`}`)
			hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Force: tc.force}}
			if tc.gate {
				ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "cr-gate-" + rand.String(8),
					Args: []string{"--feature-gates=RecreateImmutableResources=true"}})
				hr = framework.Sharded(hr, ctl)
				framework.LogsOnFailure(t, ctl)
			}
			env.Create(t, hr)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			db := env.Database(t, ns, "cr-db")
			var claim types.UID
			if tc.claim {
				claim = env.OwnedClaim(t, db, "cr-data")
			}

			setValues(t, hr, `{"size":"2Gi","annotations":`+annotations+`}`)
			if tc.want == "" {
				env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 2 * time.Minute})
				if after := env.Database(t, ns, "cr-db"); after.GetUID() == db.GetUID() {
					t.Error("the Database kept its uid: not recreated")
				}
				env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: framework.ResourceRecreatedReason,
					Contains: "Database/" + ns + "/cr-db recreated: the cluster refused to update it in place (spec.size"})
				return
			}
			field := "Database/" + ns + "/cr-db: spec.size"
			waitCondition(t, hr, 2*time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
				field, databasecrd.Message, strings.ReplaceAll(tc.want, "%s", ns))
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: helmv2.UpgradeFailedReason, Contains: field})
			if after := env.Database(t, ns, "cr-db"); after.GetUID() != db.GetUID() || after.GetDeletionTimestamp() != nil {
				t.Error("the Database was deleted")
			}
			if tc.claim {
				pvc := named(&corev1.PersistentVolumeClaim{}, ns, "cr-data")
				if uidOf(t, pvc) != claim || pvc.DeletionTimestamp != nil {
					t.Error("the Database's PersistentVolumeClaim was deleted")
				}
			}
			if env.HasEvent(t, ns, hr.Name, framework.ResourceRecreatedReason) {
				t.Errorf("%s event, want none", framework.ResourceRecreatedReason)
			}
		})
	}
}

// TestImmutableStatefulSetSelector changes the selector of an annotated
// StatefulSet: a new StatefulSet could not adopt the old pods, so it is
// refused, and the pod and its claim stay as they are.
func TestImmutableStatefulSetSelector(t *testing.T) {
	t.Parallel()
	const force = `"force":{"db":"enabled"}`
	ns, hr := immutableRelease(t, `{"db":{"enabled":true},`+force+`}`, v2.BeforeHooks)
	manualVolume(t, ns)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 2 * time.Minute})
	sts := uidOf(t, named(&appsv1.StatefulSet{}, ns, "imm-db"))
	pod := uidOf(t, named(&corev1.Pod{}, ns, "imm-db-0"))
	pvc := uidOf(t, named(&corev1.PersistentVolumeClaim{}, ns, "data-imm-db-0"))

	setValues(t, hr, `{"db":{"enabled":true,"tier":"data"},`+force+`}`)
	waitCondition(t, hr, 2*time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"StatefulSet/"+ns+"/imm-db: ", "not recreated: its selector changes, and a new StatefulSet could not adopt the pods of the old one")
	if uidOf(t, named(&appsv1.StatefulSet{}, ns, "imm-db")) != sts {
		t.Error("the StatefulSet was recreated")
	}
	p := named(&corev1.Pod{}, ns, "imm-db-0")
	if uidOf(t, p) != pod || metav1.GetControllerOf(p) == nil || metav1.GetControllerOf(p).UID != sts {
		t.Errorf("the pod was replaced or orphaned: owner %+v", metav1.GetControllerOf(p))
	}
	if uidOf(t, named(&corev1.PersistentVolumeClaim{}, ns, "data-imm-db-0")) != pvc {
		t.Error("the claim was replaced")
	}
}

// jobsOf is the path of the Jobs of ns.
func jobsOf(ns string) string { return "/apis/batch/v1/namespaces/" + ns + "/jobs" }

// createRequest matches what creates the Job name again: a server-side
// apply PATCH or a client-side POST.
func createRequest(ns, name string) func(*http.Request) bool {
	patch, post := framework.ObjectRequest(http.MethodPatch, jobsOf(ns), name), framework.ObjectRequest(http.MethodPost, jobsOf(ns), name)
	return func(r *http.Request) bool { return patch(r) || post(r) }
}

// TestImmutableRecreateCrashSafety kills the controller between the delete
// and the create of a recreate (the proxy holds the create): the Job is
// gone, and the next controller finishes the upgrade with it created
// again; no revision is left pending.
func TestImmutableRecreateCrashSafety(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, immutableChart, "0.1.0", ns)
	proxy := env.StartProxy(t)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "recreate-crash-" + rand.String(8), Kubeconfig: proxy.Kubeconfig})
	framework.LogsOnFailure(t, ctl)
	const force = `"force":{"migrate":"enabled"}`
	hr := framework.Sharded(framework.WithWaitStrategy(
		framework.Release(ns, "imm", repo.Name, ref.Name, ref.Version, `{"migrateVersion":"1",`+force+`}`), v2.BeforeHooks, 90*time.Second), ctl)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")
	old := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))

	held, release := proxy.HoldAfter(framework.ObjectRequest(http.MethodDelete, jobsOf(ns), "imm-migrate"), createRequest(ns, "imm-migrate"))
	defer release()
	setValues(t, hr, `{"migrateVersion":"2",`+force+`}`)
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		t.Fatal("no create of the Job after its deletion")
	}
	framework.Kill(t, ctl)
	release()
	if err := env.Get(context.Background(), &batchv1.Job{}, ns, "imm-migrate"); !apierrors.IsNotFound(err) {
		t.Fatalf("the Job after the kill: %v; want it deleted and not created yet", err)
	}

	framework.Restart(t, ctl)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Timeout: 3 * time.Minute})
	wantMigrated(t, ns, "2")
	if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) == old {
		t.Error("the old Job is still there")
	}
	env.WantNotPending(t, ns, "imm")
	stored := env.Storage(t, ns, "imm")
	t.Logf("Helm storage after the restart: %s", framework.Describe(stored))
	if len(stored) == 0 || stored[len(stored)-1].Release.Info.Status.String() != "deployed" {
		t.Errorf("Helm storage %s, want the latest revision deployed", framework.Describe(stored))
	}
}

// TestImmutableRecreateShutdown stops the controller with SIGTERM while a
// rollback's recreate waits for the API server (the proxy holds the
// recreate's delete). Helm's rollback cannot be cancelled, so only a
// recreate that ends with the controller's context lets the process exit
// within the graceful-shutdown period; the next controller finishes.
func TestImmutableRecreateShutdown(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, immutableChart, "0.1.0", ns)
	proxy := env.StartProxy(t)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "recreate-stop-" + rand.String(8), Kubeconfig: proxy.Kubeconfig,
		LeaderElection: true, Args: []string{"--graceful-shutdown-timeout=2m"}})
	framework.LogsOnFailure(t, ctl)
	const force = `"force":{"migrate":"enabled"}`
	hr := framework.Sharded(framework.WithWaitStrategy(
		framework.Release(ns, "imm", repo.Name, ref.Name, ref.Version, `{"migrateVersion":"1",`+force+`}`), v2.BeforeHooks, 90*time.Second), ctl)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")

	// v2 migrates (the Job is recreated), then its app never becomes
	// ready; the remediation rolls back to v1, whose Job must be
	// recreated again: that recreate's delete is held. The first delete
	// (the upgrade's) lets the hold begin.
	deleteJob := framework.ObjectRequest(http.MethodDelete, jobsOf(ns), "imm-migrate")
	heldCh, release := proxy.HoldAfter(deleteJob, deleteJob)
	defer release()
	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
		hr.Spec.Values = framework.JSON(`{"migrateVersion":"2","appFail":"crashloop",` + force + `}`)
		hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Timeout: &metav1.Duration{Duration: 20 * time.Second},
			Remediation: &helmv2.UpgradeRemediation{Retries: 1, RemediateLastFailure: ptr.To(true)}}}
		hr.Spec.Rollback = &v2.Rollback{Rollback: helmv2.Rollback{Timeout: &metav1.Duration{Duration: 2 * time.Minute}}}
	})
	select {
	case <-heldCh:
	case <-time.After(3 * time.Minute):
		t.Fatal("the rollback did not recreate the Job")
	}
	stopped := time.Now()
	if err := ctl.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := ctl.WaitExit(30 * time.Second); err != nil {
		t.Fatalf("after SIGTERM during the recreate: %v", err)
	}
	t.Logf("controller exited %s after SIGTERM", time.Since(stopped).Round(10*time.Millisecond))
	log, err := ctl.Log()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log, "it was deleted to be recreated") {
		t.Error("the log says the Job was deleted, though its deletion never reached the API server")
	}
	// Nothing lost: the next controller carries on with the Job there
	// and no revision pending.
	framework.Restart(t, ctl)
	env.Eventually(t, 3*time.Minute, "the Job present and no revision pending", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		if err := env.Get(ctx, &batchv1.Job{}, ns, "imm-migrate"); err != nil {
			return err
		}
		for _, s := range env.Storage(t, ns, "imm") {
			if st := s.Release.Info.Status.String(); strings.HasPrefix(st, "pending") {
				return fmt.Errorf("v%d %s", s.Release.Version, st)
			}
		}
		return nil
	})
}
