package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/workflowpolicy"
)

// sequencingChart is the database → migration → app chart: its migration
// Job gives up when the database is not running yet.
const sequencingChart = "sequencing-shop"

// TestSequencing installs the database, migration and app chart without
// ordering (the migration fails: nothing waits for the database) and with
// spec.waitStrategy.name ordered (db → migrate → app), upgrades it in the
// same order and uninstalls it in reverse.
func TestSequencing(t *testing.T) {
	t.Parallel()

	t.Run("without-ordered-never-ready", func(t *testing.T) {
		t.Parallel()
		ns, hr := shopRelease(t, "", false, 30*time.Second)
		env.Create(t, hr)
		waitCondition(t, hr, 90*time.Second, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		env.WantNoSecret(t, ns, "shop-app-creds")
		if env.HasEvent(t, ns, hr.Name, framework.ResourceGroupAppliedReason) {
			t.Errorf("%s events without ordered", framework.ResourceGroupAppliedReason)
		}
	})

	t.Run("ordered-installs-upgrades-uninstalls-in-order", func(t *testing.T) {
		t.Parallel()
		ns, hr := shopRelease(t, `{"misconfigured":true}`, true, 90*time.Second)
		env.Create(t, hr)
		groups := []string{"db (1/4)", "migrate (2/4)", "app (3/4)", "unsequenced (4/4)"}

		framework.Step(t, "install", func(t *testing.T) {
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			env.WantSecret(t, ns, "shop-app-creds")
			env.WantDeploymentAvailable(t, ns, "shop-app")
			wantGroupEvents(t, ns, hr.Name, framework.ResourceGroupAppliedReason, groups)
			// The ConfigMap that needs a group nobody belongs to comes last,
			// with a warning naming it.
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeWarning, Reason: framework.ResourceGroupWarningReason,
				Contains: "ConfigMap/" + ns + `/shop-misconfigured depends on resource group(s) "no-such-group"`})
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceGroupAppliedReason,
				Contains: "Resource group unsequenced (4/4) applied: ConfigMap/" + ns + "/shop-misconfigured"})
			// The metric is controller-wide: it holds at least one
			// observation per group this release saw ready (other tests
			// may add more).
			ready := groupsReady(t, ns, hr.Name)
			series := `helm_controller_action_phase_duration_seconds_count{action="install",phase="group",strategy="beforeHooks"}`
			if n := framework.Metric(t, env.Controller.MetricsURL(), series); ready < 2 || n < float64(ready) {
				t.Errorf("%s = %v with %d groups ready, want at least 2 groups and an observation per ready group", series, n, ready)
			}
		})

		framework.Step(t, "upgrade", func(t *testing.T) {
			env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"message":"two","misconfigured":true}`) })
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
			if a := env.PodTemplateAnnotations(t, ns, "shop-app"); a["e2e.afterhooks.io/message"] != "two" {
				t.Errorf("pod template annotations %v, want the upgraded message", a)
			}
			// Each group applied twice, in the same order both times.
			for _, g := range groups {
				want := framework.EventWant{Reason: framework.ResourceGroupAppliedReason, Contains: "Resource group " + g}
				if n := env.CountEvents(t, ns, hr.Name, want); n != 2 {
					t.Errorf("%d events %s, want 2", n, want)
				}
			}
			wantGroupEvents(t, ns, hr.Name, framework.ResourceGroupAppliedReason, groups)
		})

		framework.Step(t, "uninstall in reverse", func(t *testing.T) {
			objects := []client.Object{
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-app"}},
				&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-migrate"}},
				&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db"}},
			}
			gone := watchGone(t, objects)
			if err := env.Client.Delete(context.Background(), hr); err != nil {
				t.Fatal(err)
			}
			times := gone(90 * time.Second)
			for i := 1; i < len(times); i++ {
				if times[i].Before(times[i-1]) {
					t.Errorf("%s was gone at %s, before %s at %s: want the reverse of the install order",
						client.ObjectKeyFromObject(objects[i]), times[i].Format(time.StampMilli),
						client.ObjectKeyFromObject(objects[i-1]), times[i-1].Format(time.StampMilli))
				}
			}
		})
	})
}

// TestSequencingFailures: a failure expression fails the release at its
// group and nothing after it is applied; a cycle stalls the release with
// nothing applied at all.
func TestSequencingFailures(t *testing.T) {
	t.Parallel()

	t.Run("failure-expression-fails-the-release", func(t *testing.T) {
		t.Parallel()
		ns, hr := shopRelease(t, `{"migrationFails":true}`, true, 90*time.Second)
		env.Create(t, hr)
		waitCondition(t, hr, 90*time.Second, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason,
			"failed early due to stalled resources: [Job/"+ns+"/shop-migrate status: 'Failed']", "resource group migrate (2/3)", `{.failed} >= 1`)
		if err := env.Get(context.Background(), &appsv1.Deployment{}, ns, "shop-app"); !apierrors.IsNotFound(err) {
			t.Errorf("the app group after the failed one: %v, want it never applied", err)
		}
	})

	t.Run("cycle-stalls-with-nothing-applied", func(t *testing.T) {
		t.Parallel()
		ns, hr := shopRelease(t, `{"cycle":true}`, true, 90*time.Second)
		env.Create(t, hr)
		waitCondition(t, hr, 60*time.Second, meta.StalledCondition, metav1.ConditionTrue, helmv2.InstallFailedReason,
			"resource groups of chart sequencing-shop depend on each other in a cycle: app → migrate → db → app")
		if stored := env.Storage(t, ns, "shop"); len(stored) != 0 {
			t.Errorf("Helm storage %s, want nothing stored", framework.Describe(stored))
		}
		env.WantNoSecret(t, ns, "shop-db-creds")
		if err := env.Get(context.Background(), &appsv1.StatefulSet{}, ns, "shop-db"); !apierrors.IsNotFound(err) {
			t.Errorf("StatefulSet shop-db: %v, want nothing applied", err)
		}
	})
}

// TestSequencingRollback: an ordered upgrade whose app never becomes ready
// is remediated by a rollback, which applies the restored revision in its
// recorded order.
func TestSequencingRollback(t *testing.T) {
	t.Parallel()
	ns, hr := shopRelease(t, "", true, 90*time.Second)
	hr.Spec.Upgrade.Timeout = &metav1.Duration{Duration: 20 * time.Second}
	hr.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 0, RemediateLastFailure: ptr.To(true)}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"message":"two","appFails":true}`) })
	waitCondition(t, hr, 2*time.Minute, helmv2.RemediatedCondition, metav1.ConditionTrue, helmv2.RollbackSucceededReason)
	env.WantStorage(t, ns, "shop", "superseded", "failed", "deployed")
	if a := env.PodTemplateAnnotations(t, ns, "shop-app"); a["e2e.afterhooks.io/message"] != "one" {
		t.Errorf("pod template annotations %v, want v1's restored", a)
	}
	// Three passes over the groups (install, upgrade, rollback), each in
	// order; the upgrade failed in its final wait, at the app that never
	// becomes ready (nothing needs the app group, so it is not waited for
	// on its own).
	for _, g := range []string{"db (1/3)", "migrate (2/3)", "app (3/3)"} {
		want := framework.EventWant{Reason: framework.ResourceGroupAppliedReason, Contains: "Resource group " + g}
		if n := env.CountEvents(t, ns, hr.Name, want); n != 3 {
			t.Errorf("%d events %s, want 3", n, want)
		}
	}
	ready := framework.EventWant{Reason: framework.ResourceGroupReadyReason, Contains: "Resource group migrate (2/3) is ready"}
	if n := env.CountEvents(t, ns, hr.Name, ready); n != 3 {
		t.Errorf("%d events %s, want 3", n, ready)
	}
	wantGroupEvents(t, ns, hr.Name, framework.ResourceGroupAppliedReason, []string{"db (1/3)", "migrate (2/3)", "app (3/3)"})
}

// TestSequencingSubcharts orders whole subcharts: the api subchart's
// migration needs the db subchart running (depends-on on its dependency
// entry) and the parent's app needs what the migration leaves (the
// parent's helm.sh/depends-on/subcharts). The chart is packaged with its
// Chart.yaml as written: `helm package` drops depends-on.
func TestSequencingSubcharts(t *testing.T) {
	t.Parallel()
	for _, ordered := range []bool{false, true} {
		t.Run(map[bool]string{false: "unordered-migration-fails", true: "ordered"}[ordered], func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			repo := env.HelmRepository(t, ns)
			ref := env.PublishChart(t, "sequencing-platform", "0.1.0", ns, chartserver.KeepChartYAML())
			hr := framework.WithWaitStrategy(framework.Release(ns, "platform", repo.Name, ref.Name, ref.Version, ""), v2.BeforeHooks, 60*time.Second)
			if !ordered {
				hr.Spec.Install.Timeout = &metav1.Duration{Duration: 20 * time.Second}
				env.Create(t, hr)
				waitCondition(t, hr, 90*time.Second, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
				env.WantNoSecret(t, ns, "platform-app-creds")
				return
			}
			hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
			env.Create(t, hr)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			env.WantDeploymentAvailable(t, ns, "platform-app")
			wantGroupEvents(t, ns, hr.Name, framework.ResourceGroupAppliedReason, []string{"subchart db (1/3)", "subchart api (2/3)", "unsequenced (3/3)"})
		})
	}
}

// TestSequencingThirdPartyChart orders the shared podinfo chart, which
// knows nothing of resource groups, through spec.postRenderers: its redis
// cache first, then the app.
func TestSequencingThirdPartyChart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, `{"redis":{"enabled":true}}`)
	hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	// Strategic merge patches: they add to metadata.annotations whether
	// the chart gives the object annotations or not.
	group := func(apiVersion, kind, name, group, needs string) kustomize.Patch {
		patch := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  annotations:\n    helm.sh/resource-group: %s\n", apiVersion, kind, name, group)
		if needs != "" {
			patch += "    helm.sh/depends-on/resource-groups: '" + needs + "'\n"
		}
		return kustomize.Patch{Target: &kustomize.Selector{Kind: kind, Name: name}, Patch: patch}
	}
	hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{
		group("apps/v1", "Deployment", "podinfo-redis", "cache", ""),
		group("v1", "Service", "podinfo-redis", "cache", ""),
		group("v1", "ConfigMap", "podinfo-redis", "cache", ""),
		group("apps/v1", "Deployment", "podinfo", "app", `["cache"]`),
	}}}}
	env.Create(t, hr)

	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	env.WantDeploymentAvailable(t, ns, "podinfo-redis")
	env.WantDeploymentAvailable(t, ns, "podinfo")
	wantGroupEvents(t, ns, hr.Name, framework.ResourceGroupAppliedReason, []string{"cache (1/3)", "app (2/3)", "unsequenced (3/3)"})
	ready := env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceGroupReadyReason, Contains: "Resource group cache (1/3) is ready"})
	applied := env.WaitEvent(t, ns, hr.Name, framework.EventWant{Reason: framework.ResourceGroupAppliedReason, Contains: "Resource group app (2/3)"})
	if eventMoment(applied).Before(eventMoment(ready)) {
		t.Errorf("the app was applied at %s, before the cache was ready at %s", eventMoment(applied), eventMoment(ready))
	}
	// The annotation the API server refuses stays in the manifest only.
	d := &appsv1.Deployment{}
	if err := env.Get(context.Background(), d, ns, "podinfo"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.Annotations["helm.sh/depends-on/resource-groups"]; ok || d.Annotations["helm.sh/resource-group"] != "app" {
		t.Errorf("Deployment annotations %v: want helm.sh/resource-group and no depends-on", d.Annotations)
	}
}

// shopRelease publishes the shop chart in a new namespace and returns a
// HelmRelease of it with the values, beforeHooks and the timeout, ordered
// when asked; it is not created yet.
func shopRelease(t *testing.T, values string, ordered bool, timeout time.Duration) (string, *v2.HelmRelease) {
	t.Helper()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, sequencingChart, "0.1.0", ns)
	hr := framework.WithWaitStrategy(framework.Release(ns, "shop", repo.Name, ref.Name, ref.Version, values), v2.BeforeHooks, timeout)
	if ordered {
		hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	}
	return ns, hr
}

// waitCondition waits until hr has the condition with status and reason
// and a message containing each of contains.
func waitCondition(t *testing.T, hr *v2.HelmRelease, timeout time.Duration, condition string, status metav1.ConditionStatus, reason string, contains ...string) {
	t.Helper()
	env.Eventually(t, timeout, fmt.Sprintf("%s=%s/%s", condition, status, reason), func(ctx context.Context) error {
		if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
			return err
		}
		if err := framework.Condition(hr, condition, status, reason); err != nil {
			return err
		}
		msg := conditions.GetMessage(hr, condition)
		for _, want := range contains {
			if !strings.Contains(msg, want) {
				return fmt.Errorf("%s message %q does not contain %q", condition, msg, want)
			}
		}
		return nil
	})
}

// wantGroupEvents checks that the latest events of reason name the groups
// in the order given. An event seen once is placed by the nanosecond
// timestamp in its name (client-go names events <object>.<hex UnixNano>);
// a repeated one only by its last timestamp, to the second, so ties
// between repeated events pass.
func wantGroupEvents(t *testing.T, ns, name, reason string, groups []string) {
	t.Helper()
	steps := make([]groupEvent, len(groups))
	for i, g := range groups {
		steps[i] = groupEvent{reason, g}
	}
	wantGroupEventOrder(t, ns, name, steps...)
}

// groupsReady counts the ResourceGroupReady events of the HelmRelease
// ns/name.
func groupsReady(t *testing.T, ns, name string) int {
	t.Helper()
	events, err := env.Events(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range events {
		if ev.Reason == framework.ResourceGroupReadyReason {
			n++
		}
	}
	return n
}

// groupEvent is an event of a resource group: its reason and the start of
// the group's name in the message ("app (2/").
type groupEvent struct{ reason, group string }

// wantGroupEventOrder checks that the latest event of each step exists and
// that they happened in the order given, whatever their reasons.
func wantGroupEventOrder(t *testing.T, ns, name string, steps ...groupEvent) {
	t.Helper()
	events, err := env.Events(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	at := map[groupEvent]time.Time{}
	for _, ev := range events {
		for _, st := range steps {
			if ev.Reason == st.reason && strings.HasPrefix(ev.Message, "Resource group "+st.group) {
				at[st] = eventMoment(ev)
			}
		}
	}
	for i, st := range steps {
		if _, ok := at[st]; !ok {
			t.Errorf("no %s event for resource group %s", st.reason, st.group)
			return
		}
		if prev := steps[max(i-1, 0)]; i > 0 && at[st].Before(at[prev]) {
			t.Errorf("events out of order: %s %s at %s before %s %s at %s; want %v",
				st.reason, st.group, at[st].Format(time.StampMicro), prev.reason, prev.group, at[prev].Format(time.StampMicro), steps)
		}
	}
}

// eventMoment is when an event last happened, as precisely as it tells.
func eventMoment(ev corev1.Event) time.Time {
	if ev.Count <= 1 {
		if i := strings.LastIndex(ev.Name, "."); i >= 0 {
			if nanos, err := strconv.ParseInt(ev.Name[i+1:], 16, 64); err == nil {
				return time.Unix(0, nanos)
			}
		}
	}
	if !ev.LastTimestamp.IsZero() {
		return ev.LastTimestamp.Time
	}
	return ev.EventTime.Time
}

// watchGone polls objects until each is gone and returns a function that
// waits up to a timeout and gives the time each was first seen gone.
func watchGone(t *testing.T, objects []client.Object) func(time.Duration) []time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	times := make([]time.Time, len(objects))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for left := len(objects); left > 0; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			for i, obj := range objects {
				mu.Lock()
				seen := !times[i].IsZero()
				mu.Unlock()
				if seen {
					continue
				}
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
				if apierrors.IsNotFound(err) {
					mu.Lock()
					times[i] = time.Now()
					mu.Unlock()
					left--
				}
			}
		}
	}()
	return func(timeout time.Duration) []time.Time {
		select {
		case <-done:
		case <-time.After(timeout):
			cancel()
			<-done
			mu.Lock()
			defer mu.Unlock()
			var missing []string
			for i, obj := range objects {
				if times[i].IsZero() {
					missing = append(missing, fmt.Sprint(client.ObjectKeyFromObject(obj)))
				}
			}
			t.Fatalf("still there after %s: %v", timeout, missing)
		}
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}

// TestSequencingCrashSafety kills the controller while an ordered
// afterHooks install waits for its db group, and starts a new one: the
// release ends deployed, and nothing was applied out of order (the
// migration, which fails when it runs before the database, ran once and
// succeeded).
func TestSequencingCrashSafety(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, sequencingChart, "0.1.0", ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "seq-crash-" + rand.String(8)})
	hr := framework.Sharded(framework.WithWaitStrategy(framework.Release(ns, "shop", repo.Name, ref.Name, ref.Version, ""), v2.AfterHooks, 90*time.Second), ctl)
	hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
	env.Create(t, hr)

	env.Eventually(t, time.Minute, "the db group applied, the migration not yet", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		if err := env.Get(ctx, &appsv1.StatefulSet{}, ns, "shop-db"); err != nil {
			return err
		}
		if err := env.Get(ctx, &batchv1.Job{}, ns, "shop-migrate"); !apierrors.IsNotFound(err) {
			t.Fatalf("the migrate Job exists (%v) before the test could kill during the db group's wait", err)
		}
		return nil
	})
	framework.Kill(t, ctl)
	t.Logf("killed while waiting for the db group: storage %s", framework.Describe(env.Storage(t, ns, "shop")))

	framework.Restart(t, ctl)
	env.Eventually(t, 2*time.Minute, "Ready with a deployed revision", func(ctx context.Context) error {
		framework.MustRun(t, ctl)
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		return framework.ReleaseReady(hr, framework.ReleaseWant{})
	})
	env.WantNotPending(t, ns, "shop")
	env.WantDeploymentAvailable(t, ns, "shop-app")
	job := &batchv1.Job{}
	if err := env.Get(context.Background(), job, ns, "shop-migrate"); err != nil {
		t.Fatal(err)
	}
	if job.Status.Succeeded != 1 || job.Status.Failed != 0 {
		t.Errorf("migrate Job succeeded %d, failed %d: want one run, after the database", job.Status.Succeeded, job.Status.Failed)
	}
}

// TestSequencingCustomResources is the WorkflowTemplate case: admission
// (a ValidatingAdmissionPolicy whose parameter is the WorkflowTemplate,
// denying when none is found) lets a Workflow in only once a template
// exists in its namespace. Helm's kind order puts the Workflow first and
// the install fails; with resource groups and ordered it installs.
func TestSequencingCustomResources(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"Workflow", "WorkflowTemplate"} {
		crd := workflowpolicy.CRD("e2e.afterhooks.io", kind)
		if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	}
	policy, binding := workflowpolicy.Policy("e2e.afterhooks.io")
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	probe := env.Namespace(t)
	env.Eventually(t, time.Minute, "the admission policy denies a Workflow without template", func(ctx context.Context) error {
		wf := &unstructured.Unstructured{}
		wf.SetAPIVersion("e2e.afterhooks.io/v1")
		wf.SetKind("Workflow")
		wf.SetNamespace(probe)
		wf.SetName("probe")
		err := env.Client.Create(ctx, wf, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), workflowpolicy.Name) {
			return nil
		}
		return fmt.Errorf("a Workflow without template was not denied by the policy: %v", err)
	})

	for _, ordered := range []bool{false, true} {
		t.Run(map[bool]string{false: "unordered-denied", true: "ordered"}[ordered], func(t *testing.T) {
			ns := env.Namespace(t)
			repo := env.HelmRepository(t, ns)
			ref := env.PublishChart(t, "sequencing-workflows", "0.1.0", ns)
			hr := framework.WithWaitStrategy(framework.Release(ns, "pipeline", repo.Name, ref.Name, ref.Version, ""), v2.BeforeHooks, time.Minute)
			if ordered {
				hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
			}
			env.Create(t, hr)
			if ordered {
				env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
				return
			}
			waitCondition(t, hr, time.Minute, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason, workflowpolicy.Name)
		})
	}
}
