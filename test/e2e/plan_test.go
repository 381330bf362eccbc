package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/controller"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestPlanRequestedAt asks the controller for a plan with the
// helm.toolkit.fluxcd.io/planRequestedAt annotation, while the values of
// a ConfigMap in valuesFrom changed (nothing watches it, so nothing else
// starts a reconcile): the plan of an afterHooks upgrade that recreates
// the migration Job is in status.lastPlan and, in full, in an event; the
// token is recorded; and the same reconcile then does what the plan said
// (a plan request never puts off the work it finds, issue 45), with no
// requestedAt and long before the interval. Then values the chart cannot
// render: a failed plan, with a Warning event, and nothing acted on.
func TestPlanRequestedAt(t *testing.T) {
	t.Parallel()
	ns, hr := immutableRelease(t, "", v2.AfterHooks)
	values := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "imm-values", Namespace: ns},
		Data: map[string]string{"values.yaml": "migrateVersion: \"1\"\nforce:\n  migrate: enabled\n"}}
	if err := env.Client.Create(context.Background(), values); err != nil {
		t.Fatal(err)
	}
	hr.Spec.Values = nil
	hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "ConfigMap", Name: "imm-values"}}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantMigrated(t, ns, "1")
	job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))

	settings := named(&corev1.ConfigMap{}, ns, "imm-settings")
	settingsVersion := resourceVersionOf(t, settings)
	handledReconcile := hr.Status.LastHandledReconcileAt
	values.Data["values.yaml"] = "migrateVersion: \"2\"\nforce:\n  migrate: enabled\n"
	if err := env.Client.Update(context.Background(), values); err != nil {
		t.Fatal(err)
	}
	plan := requestPlan(t, hr, "plan-1")
	if plan.Failed || plan.Action != "upgrade" || !strings.Contains(plan.Summary, "recreate 1, refused 0") {
		t.Errorf("status.lastPlan %+v, want an upgrade recreating one object", plan)
	}
	event := env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: controller.PlannedReason,
		Contains: "Job/" + ns + "/imm-migrate recreated"})
	for _, want := range []string{"hook order afterHooks", "consent: its manifest says helm.toolkit.fluxcd.io/force: enabled"} {
		if !strings.Contains(event.Message, want) {
			t.Errorf("the plan's event lacks %q:\n%s", want, event.Message)
		}
	}
	t.Logf("the plan's event:\n%s", event.Message)

	// The reconcile that answered the plan request goes on and acts
	// (no requestedAt; the interval is 10 minutes): what it did is what
	// the plan said.
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
	if hr.Status.LastHandledReconcileAt != handledReconcile {
		t.Errorf("lastHandledReconcileAt %q, was %q: something else requested the reconcile", hr.Status.LastHandledReconcileAt, handledReconcile)
	}
	if hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseAction(plan.Action) {
		t.Errorf("the controller ran %s, the plan said %s", hr.Status.LastAttemptedReleaseAction, plan.Action)
	}
	newJob := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))
	var recreated []string
	if newJob != job {
		recreated = append(recreated, "Job/"+ns+"/imm-migrate")
	}
	if planned := plannedRecreates(event.Message); !slices.Equal(planned, recreated) {
		t.Errorf("recreated: the plan said %q, the controller recreated %q", planned, recreated)
	}
	if !strings.Contains(event.Message, "~ ConfigMap/imm-settings") || resourceVersionOf(t, settings) == settingsVersion {
		t.Error("the plan's update of ConfigMap imm-settings and the cluster disagree")
	}
	wantMigrated(t, ns, "2")

	// Values the chart cannot render (force is no map): the plan fails.
	values.Data["values.yaml"] = "migrateVersion: \"2\"\nforce: oops\n"
	if err := env.Client.Update(context.Background(), values); err != nil {
		t.Fatal(err)
	}
	plan = requestPlan(t, hr, "plan-2")
	if !plan.Failed || plan.Action != "" || !strings.HasPrefix(plan.Summary, "plan failed: ") {
		t.Errorf("status.lastPlan %+v, want a failed plan", plan)
	}
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: controller.PlanFailedReason,
		Contains: "plan failed: "})
	t.Logf("the failed plan: %s", plan.Summary)
	wantNotActed(t, hr, helmv2.UpgradeSucceededReason, 2, newJob)
}

// plannedRecreates are the objects a plan's text says are recreated.
func plannedRecreates(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if obj, ok := strings.CutPrefix(line, "! "); ok {
			if name, _, ok := strings.Cut(obj, " recreated (deleted and created again)"); ok {
				out = append(out, name)
			}
		}
	}
	return out
}

func resourceVersionOf(t *testing.T, obj client.Object) string {
	t.Helper()
	if err := env.Get(context.Background(), obj, obj.GetNamespace(), obj.GetName()); err != nil {
		t.Fatal(err)
	}
	return obj.GetResourceVersion()
}

// requestPlan annotates hr with the plan request token and waits until
// the controller recorded it, returning the plan's summary.
func requestPlan(t *testing.T, hr *v2.HelmRelease, token string) v2.PlanStatus {
	t.Helper()
	env.Annotate(t, hr, map[string]string{controller.PlanRequestAnnotation: token})
	var got v2.PlanStatus
	env.Eventually(t, 2*time.Minute, "the plan request "+token+" handled", func(ctx context.Context) error {
		live := &v2.HelmRelease{}
		if err := env.Get(ctx, live, hr.Namespace, hr.Name); err != nil {
			return err
		}
		if live.Status.LastHandledPlanAt != token || live.Status.LastPlan == nil || live.Status.LastPlan.RequestedAt != token {
			return fmt.Errorf("lastHandledPlanAt %q, lastPlan %+v", live.Status.LastHandledPlanAt, live.Status.LastPlan)
		}
		got = *live.Status.LastPlan
		return nil
	})
	return got
}

// wantNotActed checks, for a while, that the release is as it was: Ready
// with reason, at revision version, the Job with its UID.
func wantNotActed(t *testing.T, hr *v2.HelmRelease, reason string, version int, job types.UID) {
	t.Helper()
	env.Consistently(t, 10*time.Second, "nothing acted on", func(ctx context.Context) error {
		live := &v2.HelmRelease{}
		if err := env.Get(ctx, live, hr.Namespace, hr.Name); err != nil {
			return err
		}
		if err := framework.Condition(live, meta.ReadyCondition, metav1.ConditionTrue, reason); err != nil {
			return err
		}
		if live.Status.History.Latest().Version != version {
			return fmt.Errorf("history %s", framework.Snapshots(live.Status.History))
		}
		if uid := uidOf(t, named(&batchv1.Job{}, hr.Namespace, "imm-migrate")); uid != job {
			return fmt.Errorf("the Job was recreated")
		}
		return nil
	})
}
