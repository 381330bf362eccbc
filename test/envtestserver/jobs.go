package envtestserver

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CompleteJobStatus is the status the Job controller writes on a Job
// whose one pod succeeded. envtest runs no Job controller, and a recreate
// never stops a Job that has not finished, so tests that recreate Jobs
// write it.
func CompleteJobStatus() batchv1.JobStatus {
	started, now := metav1.NewTime(time.Now().Add(-time.Second)), metav1.Now()
	return batchv1.JobStatus{StartTime: &started, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
	}}
}

// FinishJob marks the Job ns/name Complete (CompleteJobStatus) and
// returns it. A start time already written is kept: the API server
// refuses to change it on a Job that is not suspended.
func FinishJob(t testing.TB, cs kubernetes.Interface, ns, name string) *batchv1.Job {
	t.Helper()
	ctx := context.Background()
	job, err := cs.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	started := job.Status.StartTime
	job.Status = CompleteJobStatus()
	if started != nil {
		job.Status.StartTime = started
	}
	if job, err = cs.BatchV1().Jobs(ns).UpdateStatus(ctx, job, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking Job %s/%s complete: %v", ns, name, err)
	}
	return job
}
