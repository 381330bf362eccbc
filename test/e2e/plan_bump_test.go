package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plancmd"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/realcharts"
)

// bumpPlan is the part of `plan -o json` this test reads.
type bumpPlan struct {
	Step  string `json:"step"`
	Chart struct {
		From   string `json:"from"`
		To     string `json:"to"`
		Source string `json:"source"`
	} `json:"chart"`
	plannedStep
}

// TestPlanOfAChartVersionBump is the pull-request case of issue 45: git
// holds release app at chart 1.0.0 from a HelmRepository (HTTP, then OCI)
// or from an OCIRepository chart template, on the real source-controller;
// the plan of the release as it is says "none"; the change bumps it to 1.1.0, which adds
// a ConfigMap and runs a new migration hook Job. Before the change is
// applied, the live HelmChart still serves 1.0.0: the plan fetches 1.1.0
// itself, names it, and shows the new object and the Job. Then the change
// is applied and the controller does what was planned, compared as the
// harness compares every planned step: the upgrade to 1.1.0, the object
// created, the hook run.
func TestPlanOfAChartVersionBump(t *testing.T) {
	for _, kind := range []string{"http", "oci", "ocirepository"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := env.Namespace(t)
			from := env.PublishChart(t, "plan-bump", "1.0.0", ns)
			to := env.PublishChart(t, "plan-bump", "1.1.0", ns, chartserver.WithValues(map[string]any{"migration": "v2", "cache": true}))
			repo := env.HelmRepository(t, ns)
			if kind == "oci" {
				repo = &sourcev1.HelmRepository{
					ObjectMeta: metav1.ObjectMeta{Name: "local-oci", Namespace: ns},
					Spec: sourcev1.HelmRepositorySpec{URL: env.Charts.OCIRepositoryURL(), Type: sourcev1.HelmRepositoryTypeOCI,
						Insecure: true, Interval: metav1.Duration{Duration: time.Minute}},
				}
				env.Create(t, repo)
			}
			hr := framework.Release(ns, "app", repo.Name, from.Name, from.Version, "")
			bump := func(o *v2.HelmRelease) { o.Spec.Chart.Spec.Version = to.Version }
			if kind == "ocirepository" {
				hr.Spec.Chart = &helmv2.HelmChartTemplate{Kind: sourcev1.OCIRepositoryKind, Spec: helmv2.HelmChartTemplateSpec{
					OCIRepositorySpec: sourcev1.OCIRepositorySpec{URL: env.Charts.OCIRepositoryURL() + "/" + from.Name,
						Reference: &sourcev1.OCIRepositoryRef{Tag: from.Version}, Insecure: true, Interval: &metav1.Duration{Duration: time.Minute}}}}
				bump = func(o *v2.HelmRelease) { o.Spec.Chart.Spec.Reference = &sourcev1.OCIRepositoryRef{Tag: to.Version} }
			}
			env.Create(t, hr)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 3 * time.Minute})
			// Same chart on both sides, its OCI digest included.
			if text := runPlanCommand(t, hr, "", "text"); !strings.Contains(text, "next step: none") || strings.Contains(text, " -> ") {
				t.Errorf("the plan of the unchanged release:\n%s", text)
			}

			next := hr.DeepCopy()
			bump(next)
			text := runPlanCommand(t, next, "", "text")
			t.Logf("the plan of the bump:\n%s", text)
			var plan bumpPlan
			if err := json.Unmarshal([]byte(runPlanCommand(t, next, "", "json")), &plan); err != nil {
				t.Fatal(err)
			}
			source := "HelmRepository " + ns + "/" + repo.Name
			if kind == "ocirepository" {
				source = "OCI " + strings.TrimPrefix(env.Charts.OCIRepositoryURL(), "oci://") + "/" + to.Name + ":" + to.Version
			}
			checkBumpPlan(t, plan, from, to, source)
			if kind == "http" {
				// The same bump as a kustomize build gives it, with a
				// value through valuesFrom of a ConfigMap the build adds:
				// the change applied, so its plan is the one checked.
				bump, plan = planBumpWithValuesFromStream(t, hr, bump, from, to, source)
			}

			// What the controller does is compared with the plan as the
			// harness compares every planned step (parity.ComparePlan):
			// the action, the objects created, deleted and recreated, and
			// the hooks in order.
			side := &realSide{paritySide: &paritySide{name: "bump " + kind, ns: ns, hr: hr},
				chart: realcharts.Chart{Name: "plan-bump-" + kind}, mode: realModeDefault}
			before := side.observe(t)
			env.PatchSpec(t, hr, bump)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
			side.checkPlan(t, "chart bump", &pendingPlan{preview: plan.plannedStep, ns: ns}, before, side.observe(t))
			if got := hr.Status.History.Latest().ChartVersion; got != strings.TrimPrefix(plan.Chart.To, to.Name+"@") {
				t.Errorf("the controller upgraded to chart %s, the plan said %s", got, plan.Chart.To)
			}
			config := &corev1.ConfigMap{}
			if err := env.Get(ctx, config, ns, "app-config"); kind == "http" && (err != nil || config.Data["migration"] != "v3") {
				t.Errorf("the value of the stream's ConfigMap: app-config holds %v (%v), want migration v3", config.Data, err)
			}
		})
	}
}

func checkBumpPlan(t *testing.T, plan bumpPlan, from, to chartserver.ChartRef, repo string) {
	t.Helper()
	if plan.Step != "upgrade" || len(plan.Actions) != 1 || plan.Actions[0].Verb != "upgrade" {
		t.Fatalf("the plan's step %q with %d actions, want one upgrade", plan.Step, len(plan.Actions))
	}
	// From an OCIRepository the versions carry the manifest digest.
	if !strings.HasPrefix(plan.Chart.To, to.Name+"@"+to.Version) || !strings.HasPrefix(plan.Chart.From, to.Name+"@"+from.Version) {
		t.Errorf("the plan's chart %s -> %s, want %s -> %s", plan.Chart.From, plan.Chart.To, from.Version, to.Version)
	}
	if !strings.Contains(plan.Chart.Source, repo) || !strings.Contains(plan.Chart.Source, "fetched by the plan") {
		t.Errorf("the plan says the chart came from %q, want %s, fetched by the plan", plan.Chart.Source, repo)
	}
	var created []string
	for _, o := range plan.Actions[0].Objects.Create {
		created = append(created, o.Kind+"/"+o.Name)
	}
	if !slices.Contains(created, "ConfigMap/app-cache") {
		t.Errorf("the plan creates %q, want ConfigMap/app-cache among them", created)
	}
	if hooks := plannedHooks(plan); !slices.Equal(hooks, []string{hookRun("pre-upgrade", "Job", "app-migrate")}) {
		t.Errorf("the plan's hooks %q, want the migration Job", hooks)
	}
}

func plannedHooks(plan bumpPlan) []string {
	var out []string
	for _, a := range plan.Actions {
		for _, h := range a.Hooks {
			out = append(out, hookRun(h.Phase, h.Kind, h.Name))
		}
	}
	return out
}

// planBumpWithValuesFromStream plans hr bumped and given valuesFrom a
// ConfigMap (migration: v3), in a stream of two documents that holds the
// ConfigMap, on stdin, as `kustomize build | plan --file -` does: the
// ConfigMap is not in the cluster, the plan reads the stream's. It checks
// the plan, creates the ConfigMap, and returns the change to apply and
// its plan.
func planBumpWithValuesFromStream(t *testing.T, hr *v2.HelmRelease, bump func(*v2.HelmRelease), from, to chartserver.ChartRef, source string) (func(*v2.HelmRelease), bumpPlan) {
	t.Helper()
	values := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "app-values", Namespace: hr.Namespace},
		Data:       map[string]string{"values.yaml": "migration: v3\n"}}
	withValues := func(o *v2.HelmRelease) {
		bump(o)
		o.Spec.ValuesFrom = []meta.ValuesReference{{Kind: "ConfigMap", Name: values.Name}}
	}
	next := hr.DeepCopy()
	withValues(next)
	next.APIVersion, next.Kind = v2.GroupVersion.String(), helmv2.HelmReleaseKind
	next.ManagedFields, next.ResourceVersion, next.Status = nil, "", v2.HelmReleaseStatus{}
	var stream bytes.Buffer
	for _, obj := range []any{values, next} {
		data, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(data)
	}
	args := []string{"--file", "-", "-o", "json", "--kubeconfig", env.Cluster.Kubeconfig()}
	var out, errOut bytes.Buffer
	if code := plancmd.RunWithStdin(context.Background(), args, &stream, &out, &errOut, false); code != plancmd.ExitChanges {
		t.Fatalf("plan of the stream: exit %d, %s\n%s", code, errOut.String(), out.String())
	}
	var plans []struct {
		HelmRelease string `json:"helmRelease"`
		Preview     struct {
			bumpPlan
			ValuesChanged []string `json:"valuesChanged"`
		} `json:"preview"`
	}
	if err := json.Unmarshal(out.Bytes(), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("plan of the stream, want one release: %v\n%s", err, out.String())
	}
	checkBumpPlan(t, plans[0].Preview.bumpPlan, from, to, source)
	if got := plans[0].Preview.ValuesChanged; !slices.Equal(got, []string{"migration"}) {
		t.Errorf("the plan of the stream changes values %q, want migration (the stream's ConfigMap)", got)
	}
	env.Create(t, values)
	return withValues, plans[0].Preview.bumpPlan
}
