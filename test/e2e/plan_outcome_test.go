package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plancmd"
	"github.com/afterhooks/helm-controller/test/parity"
)

// The harness's steps under ours are planned first (issue 33): right
// before a step applies its spec, `helm-controller plan` previews it,
// as a user would run it; once the step settled, what the controller did
// is compared with the plan (parity.ComparePlan). Upstream has no plans;
// the uninstall, a deletion, is not a reconcile a plan previews.

// plantPlanRecreate in realPlantEnv plants, in ours' default mode, a plan that
// omits its recreates, to show the comparison catching it.
const plantPlanRecreate = "plan-recreate"

// planTally counts, for a report, the steps planned and where the
// controller did otherwise; sides running at once share it.
type planTally struct {
	mu          sync.Mutex
	steps       int
	differences []string
}

func (p *planTally) record(scenario, step string, diffs []string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.steps++
	for _, d := range diffs {
		p.differences = append(p.differences, scenario+", "+step+": "+d)
	}
}

// pendingPlan is a step's plan, taken before the step, kept until the
// step settled: the names of its objects are read then, once the kinds
// a CRD of the step serves are known.
type pendingPlan struct {
	preview plannedStep
	ns      string
}

// plannedStep is the part of `plan -o json` (internal/preview.Preview)
// the comparison reads.
type plannedStep struct {
	Actions []struct {
		Verb    string `json:"verb"`
		Objects struct {
			Create    []plannedObject `json:"create"`
			Update    []plannedObject `json:"update"`
			Unchanged []plannedObject `json:"unchanged"`
			Delete    []plannedObject `json:"delete"`
			Keep      []plannedObject `json:"keep"`
		} `json:"objects"`
		Hooks []struct {
			Phase string `json:"phase"`
			Kind  string `json:"kind"`
			Name  string `json:"name"`
		} `json:"hooks"`
		Recreates []struct {
			Object   string `json:"object"`
			Recreate bool   `json:"recreate"`
		} `json:"recreates"`
	} `json:"actions"`
}

type plannedObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// SelfDeleting: a Job its TTL deletes once finished.
	SelfDeleting bool `json:"selfDeleting"`
}

// takePlan plans the HelmRelease step is about to apply, or returns nil
// for upstream and for a step without a plan. A release that is not in
// the cluster yet (the install) is planned with the chart's directory,
// since its HelmChart does not exist before it; the others with the
// source's artifact, as the controller gets it.
func (s *realSide) takePlan(t *testing.T, step realStep) *pendingPlan {
	t.Helper()
	if upstreamMode(s.mode) || step.next == nil {
		return nil
	}
	hr := step.next(s, t)
	chartDir := ""
	if hr.UID == "" {
		chartDir = s.dir
	}
	var extra []string
	if s.mode == realModeDefaultToAfterHooks {
		// As the controller runs with the gate.
		extra = append(extra, "--default-wait-strategy", string(v2.AfterHooks))
	}
	out := runPlanCommand(t, hr, chartDir, "json", extra...)
	p := &pendingPlan{ns: s.ns}
	if err := json.Unmarshal([]byte(out), &p.preview); err != nil {
		t.Fatalf("%s, %s: reading the plan: %v\n%s", s.mode, step.name, err, out)
	}
	return p
}

// runPlanCommand runs `helm-controller plan` as a user would, on hr
// written to a file (its spec, with the live status when it exists), and
// returns what it printed as output (text or json). chartDir, when set,
// is the chart to plan with, else the source's artifact.
func runPlanCommand(t *testing.T, hr *v2.HelmRelease, chartDir, output string, extra ...string) string {
	t.Helper()
	return runPlanCommandThrough(t, env.Cluster.Kubeconfig(), hr, chartDir, output, extra...)
}

// runPlanCommandThrough is runPlanCommand with the kubeconfig given (a
// proxy's, to see the requests).
func runPlanCommandThrough(t *testing.T, kubeconfig string, hr *v2.HelmRelease, chartDir, output string, extra ...string) string {
	t.Helper()
	hr = hr.DeepCopy()
	hr.APIVersion, hr.Kind = v2.GroupVersion.String(), helmv2.HelmReleaseKind
	hr.ManagedFields, hr.ResourceVersion = nil, ""
	data, err := yaml.Marshal(hr)
	if err != nil {
		t.Fatalf("writing the HelmRelease to plan: %v", err)
	}
	file := filepath.Join(t.TempDir(), "helmrelease.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-n", hr.Namespace, "--file", file, "-o", output, "--color", "never", "--kubeconfig", kubeconfig}
	if chartDir != "" {
		args = append(args, "--chart", chartDir)
	}
	args = append(args, extra...)
	var out, errOut bytes.Buffer
	if code := plancmd.Run(context.Background(), args, &out, &errOut, false); code == plancmd.ExitError {
		t.Fatalf("helm-controller plan %s: %s", strings.Join(args, " "), errOut.String())
	}
	return out.String()
}

// checkPlan fails t where what the controller did in step (before →
// after) differs from the plan taken before it.
func (s *realSide) checkPlan(t *testing.T, step string, p *pendingPlan, before, after parity.Observation) {
	t.Helper()
	if p == nil {
		return
	}
	prediction := s.prediction(t, p)
	if s.planted(plantPlanRecreate) {
		prediction.Recreate = nil
	}
	diffs := parity.ComparePlan(prediction, before, after)
	s.plans.record(s.chart.Name, step, diffs)
	if len(diffs) > 0 {
		t.Errorf("%s (%s), step %s: the controller did not do what the plan said:\n  %s\nplan: %+v",
			s.chart.Name, s.mode, step, strings.Join(diffs, "\n  "), prediction)
		return
	}
	t.Logf("%s (%s), step %s: done as planned: %s", s.chart.Name, s.mode, step, prediction.Summary())
}

// prediction is p's first action in the names of an observation.
func (s *realSide) prediction(t *testing.T, p *pendingPlan) parity.Prediction {
	t.Helper()
	if len(p.preview.Actions) == 0 {
		return parity.Prediction{}
	}
	a := p.preview.Actions[0]
	pr := parity.Prediction{Verb: a.Verb}
	names := func(objs []plannedObject) []string {
		var out []string
		for _, o := range objs {
			head := &unstructured.Unstructured{}
			head.SetAPIVersion(o.APIVersion)
			head.SetKind(o.Kind)
			head.SetNamespace(o.Namespace)
			head.SetName(o.Name)
			if head.GetNamespace() == "" && namespaced(t, head) {
				head.SetNamespace(p.ns)
			}
			out = append(out, s.normalise(objectName(head)))
		}
		return out
	}
	pr.Create, pr.Delete, pr.Keep = names(a.Objects.Create), names(a.Objects.Delete), names(a.Objects.Keep)
	for _, list := range [][]plannedObject{a.Objects.Create, a.Objects.Update, a.Objects.Unchanged, a.Objects.Delete, a.Objects.Keep} {
		pr.SelfDeleting = append(pr.SelfDeleting, names(slices.DeleteFunc(slices.Clone(list), func(o plannedObject) bool { return !o.SelfDeleting }))...)
	}
	for _, r := range a.Recreates {
		name := s.normalise(verdictObjectName(r.Object))
		if r.Recreate {
			pr.Recreate = append(pr.Recreate, name)
		} else {
			pr.Refused = append(pr.Refused, name)
		}
	}
	for _, h := range a.Hooks {
		pr.Hooks = append(pr.Hooks, hookRun(h.Phase, h.Kind, h.Name))
	}
	return pr
}

// verdictObjectName turns a recreate verdict's Kind/namespace/name into
// objectName's form.
func verdictObjectName(object string) string {
	parts := strings.SplitN(object, "/", 3)
	if len(parts) == 3 {
		return parts[0] + " " + parts[1] + "/" + parts[2]
	}
	return strings.Replace(object, "/", " ", 1)
}

// hookRun names one run of a hook, its random tail normalised.
func hookRun(phase, kind, name string) string {
	return phase + " " + kind + "/" + randomSuffix.ReplaceAllString(name, "-<random>")
}

// hooksRun are the hooks of rel that ran for action (its pre and post
// events), in the order they started, each in its last run (a hook of
// both phases in its post run).
func hooksRun(rel *releasev1.Release, action string) []string {
	type run struct {
		name string
		hook *releasev1.Hook
	}
	// Post first: a hook of both phases ran last (and LastRun holds
	// that run) after the apply.
	phases := []releasev1.HookEvent{releasev1.HookEvent("post-" + action), releasev1.HookEvent("pre-" + action)}
	var runs []run
	for _, h := range rel.Hooks {
		if h == nil || h.LastRun.StartedAt.IsZero() {
			continue
		}
		for _, phase := range phases {
			if slices.Contains(h.Events, phase) {
				runs = append(runs, run{hookRun(string(phase), h.Kind, h.Name), h})
				break
			}
		}
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].hook.LastRun.StartedAt.Before(runs[j].hook.LastRun.StartedAt) })
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.name
	}
	return out
}
