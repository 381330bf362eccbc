package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/databasecrd"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// podUIDs returns the UIDs of the pods of the Job ns/name.
func podUIDs(t *testing.T, ns, name string) []types.UID {
	t.Helper()
	var uids []types.UID
	for _, p := range jobPods(t, ns, name) {
		uids = append(uids, p.UID)
	}
	return uids
}

// TestImmutableRunningJob upgrades, under the RecreateImmutableResources
// gate, a release whose migration Job is still running (its pod waits for
// a Secret): the recreate is refused with a message saying so, and the
// Job and its pod are left alone until it finished; a later reconcile then
// recreates it.
func TestImmutableRunningJob(t *testing.T) {
	t.Parallel()
	ns, repo, ref, ctl := gatedImmutableChart(t, "running")
	hr := framework.Sharded(framework.WithWaitStrategy(framework.Release(ns, "imm", repo.Name, ref.Name, ref.Version,
		`{"migrateVersion":"1","migrateWaitsFor":"go"}`), v2.BeforeHooks, 30*time.Second), ctl)
	hr.Spec.Install.DisableWaitForJobs = true
	hr.Spec.Upgrade.DisableWaitForJobs = true
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))
	env.Eventually(t, time.Minute, "the migration's pod pending", func(context.Context) error {
		if len(podUIDs(t, ns, "imm-migrate")) != 1 {
			return fmt.Errorf("no pod yet")
		}
		return nil
	})
	pods := podUIDs(t, ns, "imm-migrate")

	setValues(t, hr, `{"migrateVersion":"2","migrateWaitsFor":"go"}`)
	waitCondition(t, hr, 2*time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"Job/"+ns+"/imm-migrate: spec.template: field is immutable; not recreated: it is a Job that is still running (1 active pods): "+
			"recreating it would stop it halfway; it is recreated on the next attempt after it has finished")
	env.Consistently(t, 10*time.Second, "the running Job and its pod untouched", func(context.Context) error {
		if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) != job {
			return fmt.Errorf("the running Job was recreated")
		}
		if now := podUIDs(t, ns, "imm-migrate"); len(now) != 1 || now[0] != pods[0] {
			return fmt.Errorf("its pods changed: %v, were %v", now, pods)
		}
		return nil
	})

	// The migration finishes; the next reconcile (of a new generation:
	// without remediation retries the failed upgrade waits for one)
	// recreates the Job.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "go", Namespace: ns}}
	if err := env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "the running migration finished", func(ctx context.Context) error {
		running := &batchv1.Job{}
		if err := env.Get(ctx, running, ns, "imm-migrate"); err != nil {
			return err
		}
		if running.UID != job || running.Status.Succeeded < 1 {
			return fmt.Errorf("uid %s (was %s), status %+v", running.UID, job, running.Status)
		}
		return nil
	})
	setValues(t, hr, `{"migrateVersion":"2","migrateWaitsFor":"go","attempt":"2"}`)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Timeout: 3 * time.Minute})
	if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) == job {
		t.Error("the finished Job was not recreated")
	}
	wantMigrated(t, ns, "2")
}

// TestImmutableForceClientSide upgrades with Helm's force and client-side
// apply, which replaces every object with a PUT the API server refuses for
// a Job even when it is unchanged. With the annotation on the Job, two
// upgrades that leave it unchanged keep it (and every other object); one
// that changes its template recreates the Job only.
func TestImmutableForceClientSide(t *testing.T) {
	t.Parallel()
	ns, hr := immutableRelease(t, `{"migrateVersion":"1","force":{"migrate":"enabled"}}`, v2.BeforeHooks)
	hr.Spec.Install.ServerSideApply = ptr.To(false)
	hr.Spec.Upgrade.ServerSideApply = helmv2.ServerSideApplyDisabled
	hr.Spec.Upgrade.Force = true
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")
	others := []client.Object{named(&corev1.ConfigMap{}, ns, "imm-settings"), named(&corev1.Service{}, ns, "imm-web")}
	before := map[string]types.UID{}
	for _, o := range others {
		before[o.GetName()] = uidOf(t, o)
	}
	job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))

	for i, unused := range []string{"a", "b"} {
		setValues(t, hr, `{"migrateVersion":"1","force":{"migrate":"enabled"},"unused":"`+unused+`"}`)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: i + 2, Timeout: 2 * time.Minute})
		if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) != job {
			t.Fatalf("upgrade %d, which changes no Job, recreated the Job", i+1)
		}
	}
	env.WantNoEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceRecreatedReason})

	setValues(t, hr, `{"migrateVersion":"2","force":{"migrate":"enabled"}}`)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 4, Timeout: 2 * time.Minute})
	if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) == job {
		t.Error("the changed Job was not recreated")
	}
	for _, o := range others {
		if uidOf(t, o) != before[o.GetName()] {
			t.Errorf("%T %s was recreated; only the Job may be", o, o.GetName())
		}
	}
	wantMigrated(t, ns, "2")
}

// TestImmutableRollbackOfConsent: v2 annotates the migration Job and
// changes it, so it is recreated; the app then never becomes ready and
// the upgrade fails. The rollback remediation may recreate the Job back,
// on v2's consent, and succeeds with the Job at v1.
func TestImmutableRollbackOfConsent(t *testing.T) {
	t.Parallel()
	ns, hr := immutableRelease(t, `{"migrateVersion":"1"}`, v2.BeforeHooks)
	hr.Spec.Upgrade.Timeout = &metav1.Duration{Duration: 20 * time.Second}
	hr.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptr.To(true)}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")

	setValues(t, hr, `{"migrateVersion":"2","force":{"migrate":"enabled"},"appFail":"crashloop"}`)
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceRecreatedReason, Contains: "Job/" + ns + "/imm-migrate recreated"})
	env.WaitRolledBack(t, hr, 3*time.Minute)
	wantMigrated(t, ns, "1")
}

// TestImmutableBuiltInOwner: a custom resource owned by the migration Job
// would be garbage-collected with it, so it stops the Job's recreate,
// named in the message; the Job's own pods (made again by the new Job)
// do not.
func TestImmutableBuiltInOwner(t *testing.T) {
	t.Parallel()
	env.DatabaseCRD(t)
	ns, hr := immutableRelease(t, `{"migrateVersion":"1","force":{"migrate":"enabled"}}`, v2.BeforeHooks)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")
	job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))
	db := &unstructured.Unstructured{}
	db.SetAPIVersion(framework.DatabaseGroup + "/v1")
	db.SetKind(databasecrd.Kind)
	db.SetNamespace(ns)
	db.SetName("made-by-migration")
	db.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "imm-migrate", UID: job}})
	if err := env.Client.Create(context.Background(), db); err != nil {
		t.Fatal(err)
	}

	setValues(t, hr, `{"migrateVersion":"2","force":{"migrate":"enabled"}}`)
	waitCondition(t, hr, 2*time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason,
		"Job/"+ns+"/imm-migrate: spec.template: field is immutable; not recreated: it owns Database/"+ns+"/made-by-migration, which a recreate would delete with it (a new Job makes again only its Pods)")
	if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) != job {
		t.Error("the Job was recreated")
	}
	if env.Database(t, ns, "made-by-migration").GetDeletionTimestamp() != nil {
		t.Error("the Database owned by the Job is being deleted")
	}
}
