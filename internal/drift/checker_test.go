package drift

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// The tests in this file run against a real kube-apiserver (envtest) from
// the project's tool cache: drift detection is a server-side apply dry-run,
// which only an API server can answer.

var sharedAPIServer envtestserver.Shared

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }

const helmManager = "helm-controller"

// release is a Helm release of a Deployment and a ConfigMap in ns, deployed
// the way Helm deploys it: server-side applied as helmManager with Helm's
// ownership metadata.
func release(t *testing.T, c client.Client, ns string) *releasev1.Release {
	t.Helper()
	manifest := fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 2
  selector:
    matchLabels: {app: app}
  template:
    metadata:
      labels: {app: app}
    spec:
      containers:
      - name: app
        image: ghcr.io/stefanprodan/podinfo:6.0.0
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %s
  annotations:
    # HIP-0025 ordering: kept in the manifest, never sent to the cluster
    # (the API server refuses the second key), so never drift.
    helm.sh/resource-group: settings
    helm.sh/depends-on/resource-groups: '["app"]'
data:
  color: blue
`, ns)
	return deploy(t, c, ns, manifest)
}

// deploy server-side applies manifest as Helm would (helmManager, Helm's
// ownership metadata) and returns it as revision 1 of release "app".
func deploy(t *testing.T, c client.Client, ns, manifest string) *releasev1.Release {
	t.Helper()
	rel := &releasev1.Release{Name: "app", Namespace: ns, Version: 1, Manifest: manifest}
	objects, skipped, err := newChecker(t, Options{}).desiredObjects(rel)
	if err != nil || len(skipped) > 0 {
		t.Fatal(err, skipped)
	}
	for _, obj := range objects {
		if err := c.Patch(context.Background(), obj, client.Apply, client.FieldOwner(helmManager), client.ForceOwnership); err != nil {
			t.Fatalf("deploying %s: %v", obj.GetName(), err)
		}
	}
	return rel
}

func newChecker(t *testing.T, opts Options) *Checker {
	t.Helper()
	if opts.FieldManager == "" {
		opts.FieldManager = helmManager
	}
	getter := action.NewRESTClientGetter(sharedAPIServer.Config(t))
	if opts.Dependents == nil {
		opts.Dependents = recreate.NewDependents(getter)
	}
	checker, err := NewChecker(getter, opts)
	if err != nil {
		t.Fatal(err)
	}
	return checker
}

func setup(t *testing.T) (client.Client, string, *releasev1.Release) {
	t.Helper()
	c, err := client.New(sharedAPIServer.Config(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := "drift-" + rand.String(6)
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return c, ns, release(t, c, ns)
}

// edit changes an object like `kubectl edit` does: a merge patch by
// another field manager.
func edit(t *testing.T, c client.Client, obj client.Object, manager, patch string) {
	t.Helper()
	if err := c.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner(manager)); err != nil {
		t.Fatalf("editing %s: %v", obj.GetName(), err)
	}
}

func diffTypes(set jsondiff.DiffSet) string {
	var out []string
	for _, d := range set {
		out = append(out, fmt.Sprintf("%s/%s=%s", d.GroupVersionKind().Kind, d.GetName(), d.Type))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestDetect(t *testing.T) {
	replicasRule := []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{Kind: "Deployment"}}}
	otherKindRule := []helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}, Target: &kustomize.Selector{Kind: "StatefulSet"}}}
	tests := []struct {
		name   string
		change func(t *testing.T, c client.Client, ns string)
		ignore []helmv2.IgnoreRule
		want   string
	}{
		{name: "untouched release", want: "ConfigMap/settings=none Deployment/app=none"},
		{name: "scaled Deployment", change: scale, want: "ConfigMap/settings=none Deployment/app=update"},
		{name: "ignore rule for the field", change: scale, ignore: replicasRule, want: "ConfigMap/settings=none Deployment/app=none"},
		{name: "ignore rule for another kind", change: scale, ignore: otherKindRule, want: "ConfigMap/settings=none Deployment/app=update"},
		// Paths that are not JSON pointers mean what they mean upstream
		// (see Rules).
		{name: "dotted path ignores nothing", change: scale, ignore: []helmv2.IgnoreRule{{Paths: []string{"spec.replicas"}}},
			want: "ConfigMap/settings=none Deployment/app=update"},
		{name: "path without leading slash drops its first key", change: scale, ignore: []helmv2.IgnoreRule{{Paths: []string{"spec/replicas"}}},
			want: "ConfigMap/settings=none Deployment/app=update"},
		{name: "path without leading slash that reaches the field", change: scale, ignore: []helmv2.IgnoreRule{{Paths: []string{"x/spec/replicas"}}},
			want: "ConfigMap/settings=none Deployment/app=none"},
		{name: "ignore rule for the whole object", change: scale, ignore: []helmv2.IgnoreRule{{Paths: []string{""}, Target: &kustomize.Selector{Name: "app"}}},
			want: "ConfigMap/settings=none Deployment/app=exclude"},
		{name: "annotation on the cluster object", change: func(t *testing.T, c client.Client, ns string) {
			edit(t, c, deployment(ns), "kubectl-edit", fmt.Sprintf(`{"metadata":{"annotations":{%q:"disabled"}},"spec":{"replicas":5}}`, helmv2.DriftDetectionMetadataKey))
		}, want: "ConfigMap/settings=none Deployment/app=exclude"},
		{name: "label on the cluster object", change: func(t *testing.T, c client.Client, ns string) {
			edit(t, c, deployment(ns), "kubectl-edit", fmt.Sprintf(`{"metadata":{"labels":{%q:"disabled"}},"spec":{"replicas":5}}`, helmv2.DriftDetectionMetadataKey))
		}, want: "ConfigMap/settings=none Deployment/app=exclude"},
		{name: "deleted ConfigMap", change: func(t *testing.T, c client.Client, ns string) {
			if err := c.Delete(context.Background(), configMap(ns)); err != nil {
				t.Fatal(err)
			}
		}, want: "ConfigMap/settings=create Deployment/app=none"},
		{name: "field the manifest does not set is not drift", change: func(t *testing.T, c client.Client, ns string) {
			edit(t, c, deployment(ns), "kubectl-edit", `{"spec":{"minReadySeconds":7}}`)
		}, want: "ConfigMap/settings=none Deployment/app=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ns, rel := setup(t)
			if tt.change != nil {
				tt.change(t, c, ns)
			}
			rules, _ := IgnoreRules(tt.ignore)
			set, err := newChecker(t, Options{Ignore: rules}).Detect(context.Background(), rel)
			if err != nil {
				t.Fatalf("Detect: %v", err)
			}
			if got := diffTypes(set); got != tt.want {
				t.Errorf("diffs %s, want %s", got, tt.want)
			}
		})
	}
}

func deployment(ns string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
}

func configMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
}

func scale(t *testing.T, c client.Client, ns string) {
	edit(t, c, deployment(ns), "kubectl", `{"spec":{"replicas":5}}`)
}

func TestCorrect(t *testing.T) {
	ctx := context.Background()
	c, ns, rel := setup(t)
	scale(t, c, ns)
	edit(t, c, deployment(ns), "kubectl-edit", `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`)
	if err := c.Delete(ctx, configMap(ns)); err != nil {
		t.Fatal(err)
	}

	// Replicas are someone else's business (an HPA, say); the image is not.
	rules, warnings := IgnoreRules([]helmv2.IgnoreRule{{Paths: []string{"/spec/replicas"}}})
	if len(warnings) > 0 {
		t.Fatal(warnings)
	}
	checker := newChecker(t, Options{Ignore: rules})
	set, err := checker.Detect(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if got := diffTypes(set); got != "ConfigMap/settings=create Deployment/app=update" {
		t.Fatalf("diffs %s", got)
	}
	changes, err := checker.Correct(ctx, set)
	if err != nil {
		t.Fatalf("Correct: %v", err)
	}
	want := fmt.Sprintf("ConfigMap/%s/settings created\nDeployment/%s/app configured", ns, ns)
	if got := DescribeChanges(changes); got != want {
		t.Errorf("changes:\n%s\nwant:\n%s", got, want)
	}

	d := deployment(ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/stefanprodan/podinfo:6.0.0" {
		t.Errorf("image %q not restored", img)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("replicas %d: the correction overwrote an ignored field", *d.Spec.Replicas)
	}
	if d.Labels[managedByLabel] != managedByHelm || d.Annotations[releaseNameAnnotation] != "app" {
		t.Errorf("Helm ownership metadata lost: %v %v", d.Labels, d.Annotations)
	}
	cm := configMap(ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["color"] != "blue" {
		t.Errorf("ConfigMap not recreated: %v %v", err, cm.Data)
	}

	set, err = checker.Detect(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if set.HasChanges() {
		t.Errorf("still drifted after the correction: %s", Describe(set))
	}
}

// A field the manifest does not set, added by an override manager, counts
// as drift and the correction removes it; other managers keep theirs.
func TestOverrideManagers(t *testing.T) {
	ctx := context.Background()
	c, ns, rel := setup(t)
	edit(t, c, deployment(ns), "kubectl-edit", `{"spec":{"minReadySeconds":7}}`)
	edit(t, c, configMap(ns), "some-operator", `{"data":{"size":"large"}}`)

	checker := newChecker(t, Options{OverrideManagers: []string{"kubectl-edit"}})
	set, err := checker.Detect(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if got := diffTypes(set); got != "ConfigMap/settings=none Deployment/app=update" {
		t.Fatalf("diffs %s", got)
	}
	if _, err := checker.Correct(ctx, set); err != nil {
		t.Fatal(err)
	}
	d := deployment(ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.MinReadySeconds != 0 {
		t.Errorf("minReadySeconds %d: the override manager's field survived the correction", d.Spec.MinReadySeconds)
	}
	for _, mf := range d.ManagedFields {
		if mf.Manager == "kubectl-edit" {
			t.Errorf("kubectl-edit still manages fields: %s", mf.FieldsV1.String())
		}
	}
	cm := configMap(ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil || cm.Data["size"] != "large" {
		t.Errorf("a field of a manager that is not overridden was touched: %v %v", err, cm.Data)
	}
}

// An object whose kind the cluster does not serve (its CRD was deleted,
// say) is reported, and the other objects are still compared.
func TestDetectUnknownKind(t *testing.T) {
	c, ns, rel := setup(t)
	scale(t, c, ns)
	rel.Manifest += "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: gadget\n"
	set, err := newChecker(t, Options{}).Detect(context.Background(), rel)
	if err == nil || !strings.Contains(err.Error(), `Widget "gadget"`) {
		t.Errorf("error %v, want one naming the Widget", err)
	}
	if got := diffTypes(set); got != "ConfigMap/settings=none Deployment/app=update" {
		t.Errorf("diffs %s", got)
	}
}

// TestDetectFailsLikeUpstream: where upstream's diff fails, so does this
// one, and no object comes back with drift in fields its rules ignore.
func TestDetectFailsLikeUpstream(t *testing.T) {
	replicas := helmv2.IgnoreRule{Paths: []string{"/spec/replicas"}}
	tests := []struct {
		name    string
		ignore  []helmv2.IgnoreRule
		wantErr string
		want    string
	}{
		// Upstream compiles the targets before diffing anything, and
		// fails as a whole.
		{name: "target that does not compile", ignore: []helmv2.IgnoreRule{replicas, {Paths: []string{"/data"}, Target: &kustomize.Selector{Kind: "Config(Map"}}},
			wantErr: "invalid kind regex"},
		// A path into a list by a key fails the JSON patch that removes
		// it: upstream cannot compare the Deployment and says so. The
		// Deployment must not come back compared without its rules, its
		// replicas as drift.
		{name: "path the JSON patch cannot remove", ignore: []helmv2.IgnoreRule{replicas, {Paths: []string{"/spec/template/spec/containers/name"}, Target: &kustomize.Selector{Kind: "Deployment"}}},
			wantErr: "/spec/template/spec/containers/name", want: "ConfigMap/settings=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ns, rel := setup(t)
			scale(t, c, ns)
			rules, _ := IgnoreRules(tt.ignore)
			set, err := newChecker(t, Options{Ignore: rules}).Detect(context.Background(), rel)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Detect error %v, want one naming %q", err, tt.wantErr)
			}
			if got := diffTypes(set); got != tt.want {
				t.Errorf("diffs %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCorrectWithPathsThatAreNotPointers: the correction keeps what
// detection ignored, whatever the form of the path, and puts back the rest.
func TestCorrectWithPathsThatAreNotPointers(t *testing.T) {
	ctx := context.Background()
	c, ns, rel := setup(t)
	scale(t, c, ns)
	edit(t, c, deployment(ns), "kubectl-edit", `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`)

	rules, warnings := IgnoreRules([]helmv2.IgnoreRule{{Paths: []string{"x/spec/replicas", "spec.paused"}}})
	if len(warnings) != 2 {
		t.Fatalf("warnings %q, want one per path", warnings)
	}
	checker := newChecker(t, Options{Ignore: rules})
	set, err := checker.Detect(ctx, rel)
	if err != nil {
		t.Fatal(err)
	}
	if got := diffTypes(set); got != "ConfigMap/settings=none Deployment/app=update" {
		t.Fatalf("diffs %s", got)
	}
	if _, err := checker.Correct(ctx, set); err != nil {
		t.Fatalf("Correct: %v", err)
	}
	d := deployment(ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/stefanprodan/podinfo:6.0.0" {
		t.Errorf("image %q not restored", img)
	}
	if *d.Spec.Replicas != 5 {
		t.Errorf("replicas %d: the correction overwrote a field detection ignored", *d.Spec.Replicas)
	}
}

// A Job with ttlSecondsAfterFinished that is gone deleted itself once it
// finished, as its manifest asks: no drift, so no correction runs it again.
// A Job without one that is gone was deleted by someone: drift, as
// upstream. A self-deleting Job still there is compared as any object.
func TestDetectPassesOverJobsThatDeletedThemselves(t *testing.T) {
	c, ns, _ := setup(t)
	job := func(name, ttl string) string {
		return fmt.Sprintf(`---
apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  labels: {step: one}
spec:
%s  template:
    spec:
      restartPolicy: Never
      containers:
      - name: run
        image: example.invalid/run:1
`, name, ttl)
	}
	rel := deploy(t, c, ns, job("migrate", "  ttlSecondsAfterFinished: 0\n")+job("seed", "")+job("report", "  ttlSecondsAfterFinished: 3600\n"))
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for _, name := range []string{"migrate", "seed"} {
		if err := c.Delete(context.Background(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, background); err != nil {
			t.Fatal(err)
		}
	}
	edit(t, c, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "report"}}, "kubectl-edit", `{"metadata":{"labels":{"step":"two"}}}`)

	checker := newChecker(t, Options{})
	set, err := checker.Detect(context.Background(), rel)
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	if got, want := diffTypes(set), "Job/report=update Job/seed=create"; got != want {
		t.Errorf("diffs %s, want %s", got, want)
	}
	// A plan of an upgrade still sees the gone Job: Helm creates it again.
	planned, _, err := checker.DetectRefused(context.Background(), rel)
	if err != nil {
		t.Fatalf("DetectRefused: %v", err)
	}
	if got, want := diffTypes(planned), "Job/migrate=create Job/report=update Job/seed=create"; got != want {
		t.Errorf("DetectRefused: diffs %s, want %s", got, want)
	}
}
