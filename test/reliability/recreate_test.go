package reliability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// recreateChart has a migration Job that each upgrade recreates
// (test/e2e/framework/charts/immutable-app).
const recreateChart = "immutable-app"

// recreateCell is a fault striking between the delete and the create of
// a recreate: the Job is gone and not yet created again.
type recreateCell struct{ fault string }

func (c recreateCell) String() string {
	return "upgrade, recreate between delete and create: " + c.fault
}

func recreateCells() []recreateCell {
	out := []recreateCell{{fault: faultKill}, {fault: faultHandover}}
	if full {
		out = append(out, recreateCell{fault: faultAPIServer})
	}
	return out
}

// TestFaultsRecreate upgrades a release whose migration Job must be
// recreated, and strikes (SIGKILL, a leader handover, an API server
// restart) while the Job is deleted and its new version not created yet.
// Each run must end with the Job there, once, with the new version; the
// release Ready and nothing pending; and every other object of the
// namespace untouched.
func TestFaultsRecreate(t *testing.T) {
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.LeaseNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("creating the lease namespace: %v", err)
	}
	cells := selectCells(recreateCells())
	// API server restarts stop the whole cluster: those cells alone.
	parallel := 2
	if slices.ContainsFunc(cells, func(c recreateCell) bool { return c.fault == faultAPIServer }) {
		parallel = 1
	}
	runTrials(t, cells, parallel, func(_ int, c recreateCell) row {
		began := time.Now()
		r := (&recreateTrials{fault: c.fault}).runCell(t, c)
		t.Logf("%s: %d runs, %d broke, in %s", c, r.Runs, len(r.Failures), time.Since(began).Round(time.Second))
		return r
	})
}

type recreateTrials struct {
	fault string
	ns    string
	chart chartserver.ChartRef
	repo  string
	proxy *framework.Proxy
	// faults strikes and restarts as the phase trials do.
	faults *trials
	hr     *v2.HelmRelease
}

// recreateForce annotates the Job for recreation.
const recreateForce = `"force":{"migrate":"enabled"}`

func (tr *recreateTrials) runCell(t *testing.T, c recreateCell) row {
	r := row{Section: "Faults", Case: c.String()}
	tr.ns = env.Namespace(t)
	tr.repo = env.HelmRepository(t, tr.ns).Name
	tr.chart = env.PublishChart(t, recreateChart, "0.1.0", tr.ns)
	tr.proxy = env.StartProxy(t)
	handover := tr.fault == faultHandover
	ctl, err := framework.StartController(framework.ControllerOptions{
		Binary: env.Binary, Kubeconfig: tr.proxy.Kubeconfig, LogDir: trialLogDir(t),
		Shard: "fault-recreate-" + utilrand.String(6), LeaderElection: handover,
	})
	if err != nil {
		r.Runs, r.Failures = 1, []string{"set-up: " + err.Error()}
		return r
	}
	tr.faults = &trials{cell: cell{fault: tr.fault}, ctl: ctl, ns: tr.ns}
	defer tr.faults.cleanup()
	if handover {
		if _, err := ctl.StartReplica(); err != nil {
			r.Runs, r.Failures = 1, []string{"set-up: " + err.Error()}
			return r
		}
	}
	if err := tr.install(); err != nil {
		r.Runs, r.Failures = 1, []string{"set-up: " + err.Error()}
		return r
	}
	runs := killsPerPhase()
	if tr.fault == faultAPIServer {
		runs = 1
	}
	var recoveries []time.Duration
	for i := range runs {
		r.Runs++
		recovery, broken := tr.runOnce(i)
		if len(broken) > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("run %d: %s", i+1, strings.Join(broken, "; ")))
			var b strings.Builder
			ctl.DumpLogs(&b, 40)
			t.Logf("%s, run %d broke; controller logs:\n%s", c, i+1, b.String())
			break // later runs build on this one's release
		}
		recoveries = append(recoveries, recovery)
	}
	r.Note = "settled " + spread(recoveries) + " after the fault"
	return r
}

// install creates the release at migration 1 and waits until it is Ready.
func (tr *recreateTrials) install() error {
	hr := framework.Release(tr.ns, "imm", tr.repo, tr.chart.Name, tr.chart.Version, `{"migrateVersion":"1",`+recreateForce+`}`)
	framework.Sharded(hr, tr.faults.ctl)
	unlimited := 0
	hr.Spec.MaxHistory = &unlimited
	hr.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Minute}
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{Retries: 3}}}
	if err := env.Client.Create(context.Background(), hr); err != nil {
		return err
	}
	tr.hr = hr
	bystander := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bystander", Namespace: tr.ns}, Data: map[string]string{"a": "b"}}
	if err := env.Client.Create(context.Background(), bystander); err != nil {
		return err
	}
	return tr.settle(1)
}

// settle waits until the release is Ready at its generation with the Job
// of migration version completed.
func (tr *recreateTrials) settle(version int) error {
	return env.Poll(3*time.Minute, func(ctx context.Context) error {
		if err := tr.faults.ctl.Running(); err != nil && tr.fault == faultKill {
			return errors.Join(errStop, err)
		}
		if err := env.Get(ctx, tr.hr, tr.ns, tr.hr.Name); err != nil {
			return err
		}
		if err := framework.ReleaseReady(tr.hr, framework.ReleaseWant{}); err != nil {
			return err
		}
		job := &batchv1.Job{}
		if err := env.Get(ctx, job, tr.ns, "imm-migrate"); err != nil {
			return err
		}
		if img := job.Spec.Template.Spec.Containers[0].Image; img != fmt.Sprintf("example.com/migrate:%d", version) || job.Status.Succeeded < 1 {
			return fmt.Errorf("Job image %s, succeeded %d", img, job.Status.Succeeded)
		}
		return nil
	})
}

// others are the namespace's objects a recreate of the Job must not touch.
func (tr *recreateTrials) others() []client.Object {
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: tr.ns, Name: "imm-app"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tr.ns, Name: "imm-settings"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tr.ns, Name: "imm-web"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tr.ns, Name: "bystander"}},
	}
}

func (tr *recreateTrials) uids(ctx context.Context) (map[string]types.UID, error) {
	out := map[string]types.UID{}
	for _, o := range tr.others() {
		if err := env.Get(ctx, o, o.GetNamespace(), o.GetName()); err != nil {
			return nil, fmt.Errorf("%T %s: %w", o, o.GetName(), err)
		}
		out[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetUID()
	}
	return out, nil
}

// runOnce upgrades to the next migration, strikes between the Job's
// delete and its create, and checks the end state.
func (tr *recreateTrials) runOnce(run int) (time.Duration, []string) {
	ctx := context.Background()
	version := run + 2
	before, err := tr.uids(ctx)
	if err != nil {
		return 0, []string{"before the run: " + err.Error()}
	}
	jobs := "/apis/batch/v1/namespaces/" + tr.ns + "/jobs"
	patch, post := framework.ObjectRequest(http.MethodPatch, jobs, "imm-migrate"), framework.ObjectRequest(http.MethodPost, jobs, "imm-migrate")
	held, release := tr.proxy.HoldAfter(framework.ObjectRequest(http.MethodDelete, jobs, "imm-migrate"),
		func(r *http.Request) bool { return patch(r) || post(r) })
	defer release()

	hr := &v2.HelmRelease{}
	// A conflict with the controller's own status writes means reading
	// again, not a broken run.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Get(ctx, hr, tr.ns, tr.hr.Name); err != nil {
			return err
		}
		hr.Spec.Values = framework.JSON(fmt.Sprintf(`{"migrateVersion":"%d",%s}`, version, recreateForce))
		return env.Client.Update(ctx, hr)
	})
	if err != nil {
		return 0, []string{"changing the values: " + err.Error()}
	}
	select {
	case <-held:
	case <-time.After(2 * time.Minute):
		return 0, []string{"no create of the Job after its deletion within 2m (no fault injected)"}
	}
	var broken []string
	if err := env.Get(ctx, &batchv1.Job{}, tr.ns, "imm-migrate"); err == nil {
		broken = append(broken, "the Job exists while its create is held: the hold did not fall between delete and create")
	}
	struck := make(chan error, 1)
	go func() { struck <- tr.faults.strike() }()
	if tr.fault == faultAPIServer {
		// Let the create go while the API server is away.
		time.Sleep(apiServerDown / 2)
	}
	if tr.fault != faultAPIServer {
		if err := <-struck; err != nil {
			return 0, append(broken, "striking: "+err.Error())
		}
	}
	release()
	if tr.fault == faultAPIServer {
		if err := <-struck; err != nil {
			return 0, append(broken, "striking: "+err.Error())
		}
	}
	if err := tr.faults.restart(); err != nil {
		return 0, append(broken, "restarting: "+err.Error())
	}
	restarted := time.Now()
	if err := tr.settle(version); err != nil {
		return 0, append(broken, fmt.Sprintf("not settled with migration %d: %v", version, err))
	}
	recovery := time.Since(restarted)
	broken = append(broken, tr.checkEnd(ctx, before)...)
	return recovery, broken
}

// checkEnd checks the invariants of a settled run: one Job, the other
// objects with the uids they had, nothing pending, no revision lost.
func (tr *recreateTrials) checkEnd(ctx context.Context, before map[string]types.UID) []string {
	var broken []string
	jobs := &batchv1.JobList{}
	if err := env.Client.List(ctx, jobs, client.InNamespace(tr.ns)); err != nil {
		return []string{err.Error()}
	}
	if len(jobs.Items) != 1 {
		var names []string
		for _, j := range jobs.Items {
			names = append(names, j.Name)
		}
		broken = append(broken, fmt.Sprintf("Jobs %v, want imm-migrate alone", names))
	}
	after, err := tr.uids(ctx)
	if err != nil {
		return append(broken, "something else was deleted: "+err.Error())
	}
	for k, uid := range before {
		if after[k] != uid {
			broken = append(broken, k+" was recreated")
		}
	}
	stored, err := env.ReadStorage(ctx, env.Client, tr.ns, tr.hr.Name)
	if err != nil {
		return append(broken, err.Error())
	}
	for i, s := range stored {
		if strings.HasPrefix(s.Release.Info.Status.String(), "pending") {
			broken = append(broken, fmt.Sprintf("v%d left %s", s.Release.Version, s.Release.Info.Status))
		}
		if s.Release.Version != i+1 {
			broken = append(broken, fmt.Sprintf("storage has v%d at position %d: a revision was lost", s.Release.Version, i+1))
		}
	}
	return broken
}
