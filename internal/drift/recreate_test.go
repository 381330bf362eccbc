package drift

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// jobRelease deploys a release of one Job (annotated force: annotation
// unless empty) the way Helm does.
func jobRelease(t *testing.T, c client.Client, ns, annotation string) *releasev1.Release {
	t.Helper()
	meta := ""
	if annotation != "" {
		meta = "\n  annotations:\n    helm.toolkit.fluxcd.io/force: " + annotation
	}
	manifest := fmt.Sprintf(`---
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: %s%s
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: migrate:1
`, ns, meta)
	return deploy(t, c, ns, manifest)
}

// replaceJob stands for `kubectl replace --force` with another image: the
// one drift a Job's pod template can have.
func replaceJob(t *testing.T, c client.Client, ns string) *batchv1.Job {
	t.Helper()
	ctx := context.Background()
	old := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns}}
	if err := c.Delete(ctx, old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "migrate", Image: "hand-made:9"}},
		}}},
	}
	if err := c.Create(ctx, job, client.FieldOwner("kubectl")); err != nil {
		t.Fatal(err)
	}
	// Finished, as the Job controller (which envtest lacks) would mark
	// it: a recreate never stops a Job that has not finished.
	job.Status = envtestserver.CompleteJobStatus()
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestCorrectRecreatesImmutable(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		policy     recreate.Policy
		wantErr    string
	}{
		{name: "annotated", annotation: recreate.Enabled},
		{name: "gate", policy: recreate.Policy{Gate: true}},
		{name: "not annotated", wantErr: "annotate it helm.toolkit.fluxcd.io/force: enabled"},
		{name: "opted out", annotation: recreate.Disabled, policy: recreate.Policy{Gate: true}, wantErr: "opts out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			c, ns, _ := setup(t)
			rel := jobRelease(t, c, ns, tt.annotation)
			drifted := replaceJob(t, c, ns)

			var heard []recreate.Recreated
			checker := newChecker(t, Options{Recreate: tt.policy, RecreateTimeout: time.Minute,
				OnRecreate: func(r recreate.Recreated) { heard = append(heard, r) }})
			set, err := checker.Detect(ctx, rel)
			if err != nil {
				t.Fatal(err)
			}
			if got := diffTypes(set); got != "Job/migrate=update" {
				t.Fatalf("diffs %s", got)
			}
			_, err = checker.Correct(ctx, set)
			job := &batchv1.Job{}
			if getErr := c.Get(ctx, client.ObjectKeyFromObject(drifted), job); getErr != nil {
				t.Fatal(getErr)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "Job/"+ns+"/migrate") ||
					!strings.Contains(err.Error(), "spec.template") {
					t.Fatalf("Correct = %v, want it to name Job/%s/migrate, spec.template and %q", err, ns, tt.wantErr)
				}
				if job.UID != drifted.UID || len(heard) > 0 {
					t.Errorf("the Job was recreated (%v) though it may not be", heard)
				}
				return
			}
			if err != nil {
				t.Fatalf("Correct: %v", err)
			}
			if job.UID == drifted.UID || job.Spec.Template.Spec.Containers[0].Image != "migrate:1" {
				t.Errorf("Job not recreated from the manifest: uid changed %v, image %s", job.UID != drifted.UID, job.Spec.Template.Spec.Containers[0].Image)
			}
			if len(heard) != 1 || heard[0].Object != "Job/"+ns+"/migrate" || !strings.Contains(heard[0].Fields, "spec.template") {
				t.Errorf("heard %+v", heard)
			}
			if set, err = checker.Detect(ctx, rel); err != nil || set.HasChanges() {
				t.Errorf("still drifted after the correction: %v %s", err, Describe(set))
			}
		})
	}
}

// immutableDataPolicy makes the data of ConfigMaps labelled
// e2e-immutable in ns unchangeable, except by the user "operator": what
// an operator or a webhook that mutates only creations does to an object
// nobody else may change.
func immutableDataPolicy(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	fail := admissionv1.Fail
	name := "immutable-data-" + ns
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: `request.userInfo.username == "operator" || !has(object.metadata.labels) || !("e2e-immutable" in object.metadata.labels) || object.data == oldObject.data`,
				Message:    "data is immutable",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	// The policy is in force once an update of a probe is denied.
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: map[string]string{"e2e-immutable": "true"}},
		Data: map[string]string{"a": "1"}}
	if err := c.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		probe.Data["a"] += "1"
		err := c.Update(ctx, probe)
		return err != nil && strings.Contains(err.Error(), "data is immutable"), nil
	})
	if err != nil {
		t.Fatalf("the policy is not in force: %v", err)
	}
}

// TestCorrectDoesNotRecreateInALoop: an object that something changes
// again right after its recreate (here the "operator", whom an admission
// policy lets change what nobody else may) is recreated once; refused
// again for the same manifest, the correction stops and says why.
func TestCorrectDoesNotRecreateInALoop(t *testing.T) {
	ctx := context.Background()
	c, ns, _ := setup(t)
	immutableDataPolicy(t, c, ns)
	rel := deploy(t, c, ns, fmt.Sprintf(`---
apiVersion: v1
kind: ConfigMap
metadata:
  name: guarded
  namespace: %s
  labels:
    e2e-immutable: "true"
  annotations:
    helm.toolkit.fluxcd.io/force: enabled
data:
  mode: "desired"
`, ns))
	operatorCfg := rest.CopyConfig(sharedAPIServer.Config(t))
	operatorCfg.Impersonate = rest.ImpersonationConfig{UserName: "operator", Groups: []string{"system:masters"}}
	operator, err := client.New(operatorCfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	change := func() types.UID {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns}}
		edit(t, operator, cm, "operator", `{"data":{"mode":"operator's"}}`)
		return cm.UID
	}
	checker := newChecker(t, Options{Recreate: recreate.Policy{Memory: recreate.NewMemory()}, RecreateTimeout: time.Minute})
	correct := func() error {
		t.Helper()
		set, err := checker.Detect(ctx, rel)
		if err != nil {
			t.Fatal(err)
		}
		if got := diffTypes(set); got != "ConfigMap/guarded=update" {
			t.Fatalf("diffs %s", got)
		}
		_, err = checker.Correct(ctx, set)
		return err
	}

	first := change()
	if err := correct(); err != nil {
		t.Fatalf("first correction: %v", err)
	}
	second := change()
	if second == first {
		t.Fatal("the first correction did not recreate the ConfigMap")
	}
	err = correct()
	if err == nil || !strings.Contains(err.Error(), "ConfigMap/"+ns+"/guarded") || !strings.Contains(err.Error(), "not recreated again: it was recreated at ") {
		t.Fatalf("second correction = %v, want it refused as refused again after a recreate", err)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "guarded"}, cm); err != nil || cm.UID != second {
		t.Errorf("the ConfigMap after the refused correction: %v (same uid %v); want it left alone", err, err == nil && cm.UID == second)
	}
}
