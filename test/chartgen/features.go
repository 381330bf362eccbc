package chartgen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Feature is one element of a generated chart.
type Feature interface {
	// Key names the kind of feature; expected differences from upstream
	// are listed by key.
	Key() string
	// String describes the feature with its drawn parameters.
	String() string
	// files are the chart files of the feature, the i-th of scenario s.
	files(s Scenario, i int) map[string]string
}

// drawFeature draws the i-th feature of a scenario.
func drawFeature(r *rand.Rand, i int) Feature {
	switch r.IntN(10) {
	case 0, 1, 2, 3:
		return drawHook(r)
	case 4, 5:
		return Workload{Behaviour: workloadBehaviours[r.IntN(len(workloadBehaviours))]}
	case 6, 7:
		return Immutable{Field: immutableFields[r.IntN(len(immutableFields))], Consent: r.IntN(2) == 0}
	case 8:
		return Keep{}
	default:
		return CRD{}
	}
}

// Hook is a hook Job.
type Hook struct {
	Phase  string
	Weight int
	// Policies is the hook-delete-policy annotation's value, "" for none.
	Policies string
	// TTL is the Job's ttlSecondsAfterFinished, -1 for none.
	TTL int
	// Fails: the Job's pod exits with an error.
	Fails bool
}

var (
	hookPhases = []string{"pre-install", "post-install", "pre-upgrade", "post-upgrade", "pre-delete",
		"post-delete", "pre-rollback", "post-rollback", "test"}
	hookPolicies = []string{"", "before-hook-creation", "hook-succeeded", "hook-failed",
		"before-hook-creation,hook-succeeded"}
	// hookTTLs: none, at once, or longer than any scenario. A TTL that
	// ends during the scenario would make what is left of the Job depend
	// on how long each controller took.
	hookTTLs = []int{-1, -1, 0, 3600}
)

func drawHook(r *rand.Rand) Hook {
	h := Hook{
		Phase:    hookPhases[r.IntN(len(hookPhases))],
		Weight:   r.IntN(11) - 5,
		Policies: hookPolicies[r.IntN(len(hookPolicies))],
		TTL:      hookTTLs[r.IntN(len(hookTTLs))],
	}
	// A failing delete hook would leave the HelmRelease undeletable under
	// both controllers, ending the scenario in a timeout.
	if !strings.HasSuffix(h.Phase, "-delete") {
		h.Fails = r.IntN(6) == 0
	}
	return h
}

// Key tells a failing hook Job that deletes itself at once apart: it may
// be gone before the hook wait reads it, which upstream counts as a
// success (docs/differences.md, "Jobs that failed and were then deleted
// by their TTL").
func (h Hook) Key() string {
	switch {
	case h.Fails && h.TTL == 0:
		return "hook/" + h.Phase + "/fails-ttl"
	case h.Fails:
		return "hook/" + h.Phase + "/fails"
	}
	return "hook/" + h.Phase
}

// FailingTTLHooks are failing hooks with a TTL of 0, one per phase in
// which a hook may fail.
func FailingTTLHooks() []Hook {
	var out []Hook
	for _, phase := range hookPhases {
		if !strings.HasSuffix(phase, "-delete") {
			out = append(out, Hook{Phase: phase, TTL: 0, Fails: true})
		}
	}
	return out
}

func (h Hook) String() string {
	policies, ttl := h.Policies, "none"
	if policies == "" {
		policies = "none"
	}
	if h.TTL >= 0 {
		ttl = fmt.Sprintf("%ds", h.TTL)
	}
	return fmt.Sprintf("%s weight %d delete-policy %s ttl %s", h.Key(), h.Weight, policies, ttl)
}

func (h Hook) files(_ Scenario, i int) map[string]string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: hook-%d\n  annotations:\n", i)
	fmt.Fprintf(&b, "    helm.sh/hook: %s\n    helm.sh/hook-weight: %q\n", h.Phase, fmt.Sprint(h.Weight))
	if h.Policies != "" {
		fmt.Fprintf(&b, "    helm.sh/hook-delete-policy: %s\n", h.Policies)
	}
	b.WriteString("spec:\n  backoffLimit: 0\n")
	if h.TTL >= 0 {
		fmt.Fprintf(&b, "  ttlSecondsAfterFinished: %d\n", h.TTL)
	}
	b.WriteString("  template:\n    metadata:\n      annotations:\n        sim.afterhooks.io/delay: 1s\n")
	if h.Fails {
		b.WriteString("        sim.afterhooks.io/fail: exit\n")
	}
	b.WriteString(runToCompletion("hook"))
	return map[string]string{fmt.Sprintf("templates/hook-%d.yaml", i): b.String()}
}

// runToCompletion is the pod spec of a Job, indented under
// spec.template.
func runToCompletion(container string) string {
	return fmt.Sprintf("    spec:\n      restartPolicy: Never\n      containers:\n        - name: %s\n          image: example.com/%s:1\n",
		container, container)
}

// TimedJob is an ordinary Job (no hook) that succeeds or fails Delay
// after the apply: before, while or after the hooks run (each hook runs
// for 1 s).
type TimedJob struct {
	Delay time.Duration
	Fails bool
	// TTL is the Job's ttlSecondsAfterFinished, -1 for none.
	TTL int
}

var timedJobDelays = []time.Duration{0, 2 * time.Second, 6 * time.Second}

func drawTimedJob(r *rand.Rand) TimedJob {
	return TimedJob{
		Delay: timedJobDelays[r.IntN(len(timedJobDelays))],
		Fails: r.IntN(2) == 0,
		TTL:   []int{-1, 0}[r.IntN(2)],
	}
}

// Key tells a failing Job that deletes itself at once apart, as Hook.Key
// does.
func (j TimedJob) Key() string {
	switch {
	case j.Fails && j.TTL == 0:
		return "timed-job/fails-ttl"
	case j.Fails:
		return "timed-job/fails"
	}
	return "timed-job"
}

func (j TimedJob) String() string {
	ttl := "none"
	if j.TTL >= 0 {
		ttl = fmt.Sprintf("%ds", j.TTL)
	}
	return fmt.Sprintf("%s after %s ttl %s", j.Key(), j.Delay, ttl)
}

func (j TimedJob) files(_ Scenario, i int) map[string]string {
	var b strings.Builder
	// The revision in the name: a Job's template is immutable, so each
	// upgrade makes a new one, as charts with per-release Jobs do.
	fmt.Fprintf(&b, "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: timed-job-%d-r{{ .Values.revision }}\n", i)
	b.WriteString("spec:\n  backoffLimit: 0\n")
	if j.TTL >= 0 {
		fmt.Fprintf(&b, "  ttlSecondsAfterFinished: %d\n", j.TTL)
	}
	fmt.Fprintf(&b, "  template:\n    metadata:\n      annotations:\n        sim.afterhooks.io/delay: %s\n", j.Delay)
	if j.Fails {
		b.WriteString("        sim.afterhooks.io/fail: exit\n")
	}
	b.WriteString(runToCompletion("job"))
	return map[string]string{fmt.Sprintf("templates/timed-job-%d.yaml", i): b.String()}
}

// Workload is a Deployment whose pods behave as Behaviour says.
type Workload struct{ Behaviour string }

// The workload behaviours: ready at once, ready after a few seconds,
// crash-looping, and waiting for a Secret that a post-install hook
// creates (the deadlock that afterHooks solves).
const (
	BehaviourReady     = "ready"
	BehaviourSlow      = "slow"
	BehaviourCrashLoop = "crashloop"
	BehaviourNeedsHook = "needs-hook"
)

var workloadBehaviours = []string{BehaviourReady, BehaviourSlow, BehaviourCrashLoop, BehaviourNeedsHook}

func (w Workload) Key() string    { return "workload/" + w.Behaviour }
func (w Workload) String() string { return w.Key() }

func (w Workload) files(_ Scenario, i int) map[string]string {
	name := fmt.Sprintf("app-%d", i)
	annotations := "        gen.afterhooks.io/revision: {{ .Values.revision | quote }}\n"
	var volumes string
	switch w.Behaviour {
	case BehaviourSlow:
		annotations += "        sim.afterhooks.io/delay: 4s\n"
	case BehaviourCrashLoop:
		annotations += "        sim.afterhooks.io/fail: crashloop\n"
	case BehaviourNeedsHook:
		volumes = fmt.Sprintf("          volumeMounts:\n            - name: creds\n              mountPath: /creds\n"+
			"      volumes:\n        - name: creds\n          secret:\n            secretName: %s-creds\n", name)
	}
	out := map[string]string{fmt.Sprintf("templates/%s.yaml", name): deployment(name, map[string]string{"app": name}, "", annotations) + volumes}
	if w.Behaviour == BehaviourNeedsHook {
		out[fmt.Sprintf("templates/%s-creds.yaml", name)] = credentialsHook(name)
	}
	return out
}

// deployment is a one-replica Deployment; selector labels go on the pod
// template too, annotations (indented) on it only.
func deployment(name string, selector map[string]string, metaAnnotations, podAnnotations string) string {
	var labels strings.Builder
	for _, k := range sortedKeys(selector) {
		fmt.Fprintf(&labels, "\n      %s: %s", k, selector[k])
	}
	podLabels := strings.ReplaceAll(labels.String(), "\n      ", "\n        ")
	return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n%s"+
		"spec:\n  replicas: 1\n  selector:\n    matchLabels:%s\n  template:\n    metadata:\n      labels:%s\n"+
		"      annotations:\n%s    spec:\n      containers:\n        - name: app\n          image: example.com/app:1\n",
		name, metaAnnotations, labels.String(), podLabels, podAnnotations)
}

// credentialsHook is the post-install hook Job that creates the Secret
// the workload name mounts.
func credentialsHook(name string) string {
	return fmt.Sprintf("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: %[1]s-create-creds\n  annotations:\n"+
		"    helm.sh/hook: post-install,post-upgrade\n    helm.sh/hook-delete-policy: before-hook-creation\n"+
		"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n      annotations:\n        sim.afterhooks.io/delay: 1s\n"+
		"        sim.afterhooks.io/creates: |\n          apiVersion: v1\n          kind: Secret\n          metadata:\n"+
		"            name: %[1]s-creds\n          stringData:\n            password: not-a-secret\n", name) + runToCompletion("create")
}

// Immutable is an object whose immutable field follows the `immutable`
// value, annotated with the recreate consent when Consent is set.
type Immutable struct {
	Field   string
	Consent bool
}

// The immutable fields: a Job's pod template, a Service's cluster IP, a
// Deployment's selector.
const (
	ImmutableJob      = "job-template"
	ImmutableService  = "service-clusterip"
	ImmutableSelector = "deployment-selector"
)

var immutableFields = []string{ImmutableJob, ImmutableService, ImmutableSelector}

// ConsentAnnotation is the per-object consent to recreating an object
// whose immutable field changed (docs/immutable.md).
const ConsentAnnotation = "helm.toolkit.fluxcd.io/force"

// ConsentFeatures are the immutable features that consent to being
// recreated, one per field.
func ConsentFeatures() []Immutable {
	out := make([]Immutable, len(immutableFields))
	for i, field := range immutableFields {
		out[i] = Immutable{Field: field, Consent: true}
	}
	return out
}

func (m Immutable) Key() string {
	if m.Consent {
		return "immutable/" + m.Field + "+consent"
	}
	return "immutable/" + m.Field
}

func (m Immutable) String() string { return m.Key() }

func (m Immutable) files(s Scenario, i int) map[string]string {
	metaAnnotations := ""
	if m.Consent {
		metaAnnotations = fmt.Sprintf("  annotations:\n    %s: enabled\n", ConsentAnnotation)
	}
	var text string
	switch m.Field {
	case ImmutableJob:
		text = fmt.Sprintf("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: immutable-job-%d\n%s", i, metaAnnotations) +
			"spec:\n  backoffLimit: 0\n  template:\n    metadata:\n      annotations:\n" +
			"        gen.afterhooks.io/immutable: {{ .Values.immutable | quote }}\n" + runToCompletion("job")
	case ImmutableService:
		text = fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: immutable-svc-%d\n%s", i, metaAnnotations) +
			"spec:\n  {{- if eq (int .Values.immutable) 0 }}\n  clusterIP: None\n  {{- else }}\n" +
			fmt.Sprintf("  clusterIP: %s.{{ add %d .Values.immutable }}\n  {{- end }}\n", s.serviceNet(i), 10) +
			"  ports:\n    - port: 80\n  selector:\n    app: nothing\n"
	default:
		name := fmt.Sprintf("immutable-sel-%d", i)
		text = deployment(name, map[string]string{"app": name, "gen.afterhooks.io/selector": "s{{ .Values.immutable }}"},
			metaAnnotations, "        gen.afterhooks.io/revision: {{ .Values.revision | quote }}\n")
	}
	return map[string]string{fmt.Sprintf("templates/immutable-%d.yaml", i): text}
}

// serviceNet is the first three octets of the fixed cluster IPs of the
// scenario's i-th feature: inside the test cluster's service range
// 10.96.0.0/16, drawn from the seed so that scenarios running at the same
// time rarely ask for the same address.
func (s Scenario) serviceNet(i int) string {
	return fmt.Sprintf("10.96.%d", 100+(s.Seed+uint64(i))%150)
}

// Keep is a ConfigMap with `helm.sh/resource-policy: keep`: an uninstall
// leaves it.
type Keep struct{}

func (Keep) Key() string    { return "keep" }
func (Keep) String() string { return "keep" }

func (Keep) files(_ Scenario, i int) map[string]string {
	return map[string]string{fmt.Sprintf("templates/kept-%d.yaml", i): fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept-%d\n  annotations:\n    helm.sh/resource-policy: keep\n"+
			"data:\n  revision: {{ .Values.revision | quote }}\n", i)}
}

// CRD is a CustomResourceDefinition in crds/ and a custom resource of it
// in templates/. Its group carries the seed: CRDs are cluster-scoped.
type CRD struct{}

func (CRD) Key() string    { return "crd" }
func (CRD) String() string { return "crd" }

func (CRD) files(s Scenario, i int) map[string]string {
	group := fmt.Sprintf("g%016x.chartgen.afterhooks.io", s.Seed)
	plural := fmt.Sprintf("gens%d", i)
	crd := fmt.Sprintf("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: %[1]s.%[2]s\n"+
		"spec:\n  group: %[2]s\n  scope: Namespaced\n  names:\n    plural: %[1]s\n    singular: gen%[3]d\n    kind: Gen%[3]d\n"+
		"  versions:\n    - name: v1\n      served: true\n      storage: true\n      schema:\n        openAPIV3Schema:\n"+
		"          type: object\n          x-kubernetes-preserve-unknown-fields: true\n", plural, group, i)
	cr := fmt.Sprintf("apiVersion: %s/v1\nkind: Gen%d\nmetadata:\n  name: cr-%d\nspec:\n  revision: {{ .Values.revision | quote }}\n",
		group, i, i)
	return map[string]string{
		fmt.Sprintf("crds/gen-%d.yaml", i):     crd,
		fmt.Sprintf("templates/cr-%d.yaml", i): cr,
	}
}
