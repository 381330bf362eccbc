package drift

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/recreate"
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
		{name: "every object", policy: recreate.Policy{All: true}},
		{name: "not annotated", wantErr: "annotate it helm.toolkit.fluxcd.io/force: enabled"},
		{name: "opted out", annotation: recreate.Disabled, policy: recreate.Policy{All: true}, wantErr: "opts out"},
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
