package e2e

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/realcharts"
)

// TestPlanOfARealChartUpgradeRecreatingAJob plans, with the command a
// user runs, an afterHooks upgrade of the published cert-manager chart
// whose startupapicheck Job is a plain Job (it, its ServiceAccount and
// RBAC without their hook annotations, the Job with the force consent, as
// a user who keeps the check's Job and its record does) and
// whose timeout changes: the API server refuses the Job's new pod
// template in place. The plan says the Job is recreated, with the
// annotation's consent, around the afterHooks sequence; the controller
// then upgrades and the Job has a new uid. The text is docs/plan.md's
// real-chart example. The release is named plan-cm and leaves the CRDs
// out, so that its cluster-scoped objects do not meet those of the
// corpus run of the same chart.
func TestPlanOfARealChartUpgradeRecreatingAJob(t *testing.T) {
	t.Parallel()
	dir := corpusChartDir(t, "cert-manager")
	ref, err := env.Charts.AddChart(dir, chartserver.WithVersion("0.0.0-plan.cert-manager"))
	if err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := framework.Release(ns, "plan-cm", repo.Name, ref.Name, ref.Version, "")
	hr.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
	hr.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	// null drops the chart's default hook annotations: the Job, its
	// ServiceAccount and RBAC become plain objects of the release.
	notHooks := func(extra map[string]any) map[string]any {
		annotations := map[string]any{"helm.sh/hook": nil, "helm.sh/hook-weight": nil, "helm.sh/hook-delete-policy": nil}
		maps.Copy(annotations, extra)
		return annotations
	}
	startupCheck := func(timeout string) map[string]any {
		return map[string]any{"crds": map[string]any{"enabled": false}, "startupapicheck": map[string]any{
			"timeout":        timeout,
			"jobAnnotations": notHooks(map[string]any{recreate.Annotation: recreate.Enabled}),
			"rbac":           map[string]any{"annotations": notHooks(nil)},
			"serviceAccount": map[string]any{"annotations": notHooks(nil)},
		}}
	}
	hr.Spec.Values = framework.JSONFrom(startupCheck("1m"))
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 3 * time.Minute})
	jobName := "plan-cm-cert-manager-startupapicheck"
	job := uidOf(t, named(&batchv1.Job{}, ns, jobName))

	next := hr.DeepCopy()
	next.Spec.Values = framework.JSONFrom(startupCheck("2m"))
	// Through a proxy of the test framework, which sees every request
	// the plan makes: reads and dry runs only.
	proxy := env.StartProxy(t)
	var mu sync.Mutex
	var reads, dryRuns int
	var writes []string
	stop := proxy.Observe(func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet:
			reads++
		case slices.Contains(r.URL.Query()["dryRun"], "All"):
			dryRuns++
		default:
			writes = append(writes, r.Method+" "+r.URL.Path)
		}
	})
	began := time.Now()
	text := runPlanCommandThrough(t, proxy.Kubeconfig, next, "", "text")
	took := time.Since(began)
	stop()
	t.Logf("helm-controller plan -n %s --file hr.yaml (%s, %d reads, %d dry runs through the proxy):\n%s",
		ns, took.Round(time.Millisecond), reads, dryRuns, text)
	if len(writes) > 0 || dryRuns == 0 {
		t.Errorf("the plan sent %d dry runs and these other requests than reads: %q", dryRuns, writes)
	}
	for _, want := range []string{"next step: upgrade", "hook order afterHooks",
		"Job/" + ns + "/" + jobName + " recreated (deleted and created again)", "consent: " + string(recreate.ConsentAnnotation)} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan lacks %q", want)
		}
	}

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = next.Spec.Values })
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
	if uidOf(t, named(&batchv1.Job{}, ns, jobName)) == job {
		t.Errorf("the plan said Job %s is recreated; it kept its uid", jobName)
	}
}

// corpusChartDir is the directory of the corpus chart name, or skips t
// when the tools cache lacks it.
func corpusChartDir(t *testing.T, name string) string {
	t.Helper()
	charts, err := realcharts.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := cluster.ToolBinDir("")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if c.Name != name {
			continue
		}
		dir, err := c.Dir(bin)
		if err != nil {
			t.Skip(err.Error())
		}
		return dir
	}
	t.Fatalf("the corpus has no chart %s", name)
	return ""
}
