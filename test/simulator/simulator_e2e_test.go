package simulator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/simulator"
)

// startCluster starts a local cluster, which runs this package's kwok stages
// and Run, and stops it when the test ends. kwok's log is quoted on failure:
// stage errors only show up there.
func startCluster(t *testing.T) kubernetes.Interface {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a local cluster; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(t.Context(), cluster.DefaultTimeout)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Name: "simulator", Logs: testLog{t}})
	if err != nil {
		t.Fatalf("starting cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- kwok log tail:\n%s", fileTail(c.LogFile("kwok"), 30))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stopping cluster: %v", err)
		}
	})
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatalf("creating client: %v", err)
	}
	return client
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func fileTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// e2e holds one namespace of the shared test cluster.
type e2e struct {
	t         *testing.T
	ctx       context.Context
	client    kubernetes.Interface
	namespace string
}

func newE2E(t *testing.T, client kubernetes.Interface, name string) *e2e {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sim-" + name}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		err := client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	e := &e2e{t: t, ctx: ctx, client: client, namespace: ns.Name}
	e.waitForServiceAccount()
	return e
}

// waitForServiceAccount avoids a race with the service account controller:
// pods are rejected until the namespace's default ServiceAccount exists.
func (e *e2e) waitForServiceAccount() {
	e.eventually(30*time.Second, "default service account exists", func() (bool, string) {
		_, err := e.client.CoreV1().ServiceAccounts(e.namespace).Get(e.ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

// eventually polls cond until it holds; state describes what was last seen.
func (e *e2e) eventually(timeout time.Duration, what string, cond func() (ok bool, state string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	var state string
	for {
		var ok bool
		ok, state = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			e.t.Fatalf("timed out after %s waiting until %s; last seen: %s", timeout, what, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// consistently checks that cond holds for the whole duration.
func (e *e2e) consistently(duration time.Duration, what string, cond func() (ok bool, state string)) {
	e.t.Helper()
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		if ok, state := cond(); !ok {
			e.t.Fatalf("expected %s to hold for %s, but: %s", what, duration, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (e *e2e) createDeployment(name string, annotations map[string]string, mutate func(*corev1.PodSpec)) {
	e.t.Helper()
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}
	if mutate != nil {
		mutate(&spec)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.namespace},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       spec,
			},
		},
	}
	if _, err := e.client.AppsV1().Deployments(e.namespace).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating deployment %s: %v", name, err)
	}
}

func (e *e2e) createJob(name string, backoffLimit int32, annotations map[string]string) {
	e.t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.namespace},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoffLimit,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "job", Image: "example.com/job:1"}},
				},
			},
		},
	}
	if _, err := e.client.BatchV1().Jobs(e.namespace).Create(e.ctx, j, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("creating job %s: %v", name, err)
	}
}

func (e *e2e) deploymentAvailable(name string) (bool, string) {
	d, err := e.client.AppsV1().Deployments(e.namespace).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue && d.Status.AvailableReplicas > 0,
				fmt.Sprintf("Available=%s (%s), availableReplicas=%d", c.Status, c.Message, d.Status.AvailableReplicas)
		}
	}
	return false, fmt.Sprintf("no Available condition yet, availableReplicas=%d", d.Status.AvailableReplicas)
}

func (e *e2e) jobCondition(name string, want batchv1.JobConditionType) (bool, string) {
	j, err := e.client.BatchV1().Jobs(e.namespace).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	var seen []string
	for _, c := range j.Status.Conditions {
		seen = append(seen, fmt.Sprintf("%s=%s", c.Type, c.Status))
		if c.Type == want && c.Status == corev1.ConditionTrue {
			return true, ""
		}
	}
	return false, fmt.Sprintf("conditions %v, succeeded=%d failed=%d", seen, j.Status.Succeeded, j.Status.Failed)
}

// onlyPod returns the single pod matching selector, or a description of why not.
func (e *e2e) onlyPod(selector string) (*corev1.Pod, string) {
	pods, err := e.client.CoreV1().Pods(e.namespace).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err.Error()
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Sprintf("%d pods", len(pods.Items))
	}
	return &pods.Items[0], ""
}

func TestWorkloadSimulator(t *testing.T) {
	client := startCluster(t)

	t.Run("deployment waits for its secret", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, client, "missing-secret")
		e.createDeployment("web", nil, func(spec *corev1.PodSpec) {
			spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "late"},
			}}}
		})

		e.eventually(30*time.Second, "the pod says which secret it waits for", func() (bool, string) {
			pod, why := e.onlyPod("app=web")
			if pod == nil || len(pod.Status.ContainerStatuses) == 0 {
				return false, why
			}
			w := pod.Status.ContainerStatuses[0].State.Waiting
			return w != nil && w.Reason == simulator.ReasonContainerCreating && strings.Contains(w.Message, `secret "late" not found`),
				fmt.Sprintf("%+v", pod.Status.ContainerStatuses[0].State)
		})
		e.consistently(5*time.Second, "the deployment is unavailable", func() (bool, string) {
			ok, state := e.deploymentAvailable("web")
			return !ok, state
		})

		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: e.namespace}}
		if _, err := client.CoreV1().Secrets(e.namespace).Create(e.ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.eventually(30*time.Second, "the deployment is available", func() (bool, string) {
			return e.deploymentAvailable("web")
		})
	})

	t.Run("job creates its declared secret and completes", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, client, "declared-object")
		e.createJob("hook", 0, map[string]string{
			simulator.DelayAnnotation: "2s",
			simulator.CreatesAnnotation: `apiVersion: v1
kind: Secret
metadata:
  name: made-by-hook
stringData:
  password: not-a-secret
`,
		})

		e.eventually(60*time.Second, "the job is complete", func() (bool, string) {
			return e.jobCondition("hook", batchv1.JobComplete)
		})
		secret, err := client.CoreV1().Secrets(e.namespace).Get(e.ctx, "made-by-hook", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("declared secret: %v", err)
		}
		if string(secret.Data["password"]) != "not-a-secret" {
			t.Errorf("secret data = %v", secret.Data)
		}
		job, err := client.BatchV1().Jobs(e.namespace).Get(e.ctx, "hook", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The secret must exist before the pod finishes, and the delay must
		// have been honoured (timestamps have one-second resolution).
		if job.Status.CompletionTime != nil && secret.CreationTimestamp.After(job.Status.CompletionTime.Time) {
			t.Errorf("secret created at %v, after the job completed at %v", secret.CreationTimestamp, job.Status.CompletionTime)
		}
		if job.Status.StartTime != nil && secret.CreationTimestamp.Sub(job.Status.StartTime.Time) < time.Second {
			t.Errorf("secret created at %v, too soon after the job started at %v for a 2s delay",
				secret.CreationTimestamp, job.Status.StartTime)
		}
	})

	t.Run("crash-looping deployment never becomes available", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, client, "crashloop")
		e.createDeployment("crashy", map[string]string{simulator.FailAnnotation: simulator.FailCrashLoop}, nil)

		e.eventually(30*time.Second, "the container restarted twice", func() (bool, string) {
			pod, why := e.onlyPod("app=crashy")
			if pod == nil || len(pod.Status.ContainerStatuses) == 0 {
				return false, why
			}
			cs := pod.Status.ContainerStatuses[0]
			return cs.RestartCount >= 2 && !cs.Ready, fmt.Sprintf("restarts=%d ready=%v", cs.RestartCount, cs.Ready)
		})
		e.consistently(5*time.Second, "the deployment is unavailable", func() (bool, string) {
			ok, state := e.deploymentAvailable("crashy")
			return !ok, state
		})
	})

	t.Run("failing job fails", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, client, "failing-job")
		e.createJob("broken", 1, map[string]string{simulator.FailAnnotation: simulator.FailExit})

		e.eventually(60*time.Second, "the job failed", func() (bool, string) {
			return e.jobCondition("broken", batchv1.JobFailed)
		})
		job, err := client.BatchV1().Jobs(e.namespace).Get(e.ctx, "broken", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if job.Status.Failed != 2 || job.Status.Succeeded != 0 {
			t.Errorf("failed=%d succeeded=%d, want 2 failed pods for backoffLimit 1", job.Status.Failed, job.Status.Succeeded)
		}
	})

	t.Run("bare pods run to completion", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, client, "bare-pods")
		for name, want := range map[string]corev1.PodPhase{"passes": corev1.PodSucceeded, "fails": corev1.PodFailed} {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.namespace},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "test", Image: "example.com/test:1"}},
				},
			}
			if want == corev1.PodFailed {
				pod.Annotations = map[string]string{simulator.FailAnnotation: simulator.FailExit}
			}
			if _, err := client.CoreV1().Pods(e.namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for name, want := range map[string]corev1.PodPhase{"passes": corev1.PodSucceeded, "fails": corev1.PodFailed} {
			e.eventually(30*time.Second, fmt.Sprintf("pod %s is %s", name, want), func() (bool, string) {
				pod, err := client.CoreV1().Pods(e.namespace).Get(e.ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return pod.Status.Phase == want, string(pod.Status.Phase)
			})
		}
	})

	t.Run("slow deployment becomes available after its delay", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t, client, "slow")
		e.createDeployment("slow", map[string]string{simulator.DelayAnnotation: "6s"}, nil)

		e.eventually(30*time.Second, "the pod runs", func() (bool, string) {
			pod, why := e.onlyPod("app=slow")
			if pod == nil {
				return false, why
			}
			return pod.Status.Phase == corev1.PodRunning, string(pod.Status.Phase)
		})
		e.consistently(3*time.Second, "the deployment is still unavailable", func() (bool, string) {
			ok, state := e.deploymentAvailable("slow")
			return !ok, state
		})
		e.eventually(30*time.Second, "the deployment is available", func() (bool, string) {
			return e.deploymentAvailable("slow")
		})
	})
}
