package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The plan predicts with the settings of the controller it previews (issue
// 45): a controller of the test's own runs with a feature gate; the plan
// reads the gate from a Deployment holding the same arguments, or takes it
// from its own --feature-gates; the controller then does what the plan
// said. A plan that finds no Deployment predicts with the defaults, as
// every plan did before, and says so.

// controllerDeployment is the name of the stand-in Deployment the plans
// read.
const controllerDeployment = "helm-controller"

// settingsPlan is the part of `plan -o json` these tests read.
type settingsPlan struct {
	Step    string `json:"step"`
	Reason  string `json:"reason"`
	Actions []struct {
		Verb      string `json:"verb"`
		Recreates []struct {
			Object   string `json:"object"`
			Recreate bool   `json:"recreate"`
		} `json:"recreates"`
	} `json:"actions"`
	Settings struct {
		Controller string `json:"controller"`
		Used       []struct {
			Name, Value, From string
		} `json:"used"`
		Notes []string `json:"notes"`
	} `json:"settings"`
}

// gatePlans are the plans of one change, each taken another way.
type gatePlans struct {
	deployment, flags, defaults settingsPlan
}

func TestPlanPredictsWithTheControllersSettings(t *testing.T) {
	t.Parallel()
	t.Run("DefaultToRetryOnFailure", func(t *testing.T) {
		t.Parallel()
		planRetryOnFailure(t)
	})
	t.Run("RecreateImmutableResources", func(t *testing.T) {
		t.Parallel()
		planRecreateImmutable(t)
	})
}

// gatedRelease starts a controller with gate on for a new namespace, the
// stand-in Deployment with the same arguments, and installs immutable-app
// through the controller.
func gatedRelease(t *testing.T, gate string) (string, *v2.HelmRelease) {
	t.Helper()
	ns, hr := immutableRelease(t, "", v2.BeforeHooks)
	args := []string{"--feature-gates=" + gate + "=true"}
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "gates-" + rand.String(8), Args: args})
	framework.LogsOnFailure(t, ctl)
	standInDeployment(t, ns, args)
	hr = framework.Sharded(hr, ctl)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	return ns, hr
}

// standInDeployment writes ns/helm-controller as Flux installs the
// controller, with args: the test's controller is a process, so this
// object only carries its arguments for the plan to read; no replica runs.
func standInDeployment(t *testing.T, ns string, args []string) {
	t.Helper()
	labels := map[string]string{"app": controllerDeployment}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: controllerDeployment, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: "ghcr.io/afterhooks/helm-controller:e2e",
					Args: append([]string{"--watch-all-namespaces", "--log-level=info", "--events-addr", "http://nowhere"}, args...),
				}}},
			},
		},
	}
	if err := env.Client.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// takeGatePlans plans hr three ways: reading the stand-in Deployment;
// with the gate given as a flag (and no Deployment found); with nothing
// (no Deployment, no flag: the defaults).
func takeGatePlans(t *testing.T, hr *v2.HelmRelease, gate string) gatePlans {
	t.Helper()
	take := func(args ...string) settingsPlan {
		out := runPlanCommand(t, hr, "", "json", append([]string{"--controller-namespace", hr.Namespace}, args...)...)
		var p settingsPlan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("reading the plan: %v\n%s", err, out)
		}
		return p
	}
	p := gatePlans{
		deployment: take("--controller-name", controllerDeployment),
		flags:      take("--controller-name", "absent", "--feature-gates", gate+"=true"),
		defaults:   take("--controller-name", "absent"),
	}
	wantSetting(t, "deployment", p.deployment, gate, "true", "Deployment "+hr.Namespace+"/"+controllerDeployment)
	wantSetting(t, "flags", p.flags, gate, "true", "plan flag --feature-gates")
	wantSetting(t, "defaults", p.defaults, gate, "false", "default")
	if len(p.deployment.Settings.Notes) != 0 {
		t.Errorf("the plan that read the Deployment has notes %q", p.deployment.Settings.Notes)
	}
	for name, pl := range map[string]settingsPlan{"flags": p.flags, "defaults": p.defaults} {
		if len(pl.Settings.Notes) != 1 || !strings.Contains(pl.Settings.Notes[0], "Deployment "+hr.Namespace+"/absent not found") {
			t.Errorf("%s: notes %q, want the absent Deployment named", name, pl.Settings.Notes)
		}
	}
	return p
}

// wantSetting checks that the plan says it used gate at value, from from.
func wantSetting(t *testing.T, name string, p settingsPlan, gate, value, from string) {
	t.Helper()
	for _, u := range p.Settings.Used {
		if u.Name == gate {
			if u.Value != value || u.From != from {
				t.Errorf("%s: the plan used %s=%s from %q, want %s from %q", name, gate, u.Value, u.From, value, from)
			}
			return
		}
	}
	t.Errorf("%s: the plan does not say what %s it used: %+v", name, gate, p.Settings)
}

// planRetryOnFailure: an upgrade the API server refuses (the migration
// Job's template is immutable) fails; with DefaultToRetryOnFailure the
// controller upgrades again, where the default remediation (no retries)
// would stop.
func planRetryOnFailure(t *testing.T) {
	ns, hr := gatedRelease(t, "DefaultToRetryOnFailure")
	setValues(t, hr, `{"migrateVersion":"2"}`)
	env.WaitNotReady(t, hr, helmv2.UpgradeFailedReason, "")
	// The controller writes the conditions before the history: the plan
	// and the check below start from the failed revision recorded.
	var failed int
	env.Eventually(t, time.Minute, "the failed upgrade recorded", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		latest := hr.Status.History.Latest()
		if latest == nil || latest.Version < 2 || hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionUpgrade {
			return fmt.Errorf("history %s", framework.Snapshots(hr.Status.History))
		}
		failed = latest.Version
		return nil
	})
	p := takeGatePlans(t, hr, "DefaultToRetryOnFailure")
	for name, pl := range map[string]settingsPlan{"deployment": p.deployment, "flags": p.flags} {
		if pl.Step != "upgrade" {
			t.Errorf("%s: the plan says %s (%s), want upgrade", name, pl.Step, pl.Reason)
		}
	}
	if p.defaults.Step != "none" || !strings.Contains(p.defaults.Reason, "retries exhausted") {
		t.Errorf("without the gate the plan says %s (%s), want none (retries exhausted)", p.defaults.Step, p.defaults.Reason)
	}

	// What the plan said: the controller upgrades again when asked
	// (the retry interval is 5 minutes), and fails again.
	env.RequestReconcile(t, hr)
	env.Eventually(t, 2*time.Minute, "the upgrade tried again", func(ctx context.Context) error {
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		if latest := hr.Status.History.Latest(); latest == nil || latest.Version <= failed {
			return fmt.Errorf("history %s", framework.Snapshots(hr.Status.History))
		}
		return nil
	})
	if hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionUpgrade {
		t.Errorf("the controller ran %s, the plan said upgrade", hr.Status.LastAttemptedReleaseAction)
	}
}

// planRecreateImmutable: the same upgrade, under
// RecreateImmutableResources, recreates the migration Job.
func planRecreateImmutable(t *testing.T) {
	ns, hr := gatedRelease(t, "RecreateImmutableResources")
	job := uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate"))
	next := hr.DeepCopy()
	next.Spec.Values = framework.JSON(`{"migrateVersion":"2"}`)
	p := takeGatePlans(t, next, "RecreateImmutableResources")
	want := "Job/" + ns + "/imm-migrate"
	for name, pl := range map[string]settingsPlan{"deployment": p.deployment, "flags": p.flags} {
		if got := plannedJobRecreates(pl); !slices.Equal(got, []string{want}) {
			t.Errorf("%s: the plan recreates %q, want %q", name, got, want)
		}
	}
	if got := plannedJobRecreates(p.defaults); len(got) != 0 {
		t.Errorf("without the gate the plan recreates %q, want the Job refused", got)
	}

	setValues(t, hr, `{"migrateVersion":"2"}`)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 2 * time.Minute})
	if uidOf(t, named(&batchv1.Job{}, ns, "imm-migrate")) == job {
		t.Error("the plan said the Job is recreated; the controller did not recreate it")
	}
	wantMigrated(t, ns, "2")
}

// plannedJobRecreates are the objects an upgrade plan recreates.
func plannedJobRecreates(p settingsPlan) []string {
	var out []string
	for _, a := range p.Actions {
		for _, r := range a.Recreates {
			if r.Recreate {
				out = append(out, r.Object)
			}
		}
	}
	return out
}
