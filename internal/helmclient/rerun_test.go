package helmclient

import (
	"context"
	"fmt"
	"strings"
	"testing"

	helmkube "helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/hookcleanup"
)

// hookJobManifest is jobManifest annotated as a hook of events, with
// extra annotation lines.
func hookJobManifest(name, events string, extra ...string) string {
	m := jobManifest(name, false)
	annotations := "  annotations:\n    helm.sh/hook: " + events + "\n"
	for _, a := range extra {
		annotations += "    " + a + "\n"
	}
	return strings.Replace(m, "  name: "+name+"\n", "  name: "+name+"\n"+annotations, 1)
}

// A hook Job that an earlier run left finished (its delete policy keeps
// it) is run again when the hook runs again: Helm's server-side create
// would otherwise change it in place and its wait would read the old
// outcome as the new run's. The table creates the earlier run, creates the
// hook through Create as Helm does, and reads whether the live Job is a
// new one (another uid, no outcome yet).
func TestCreateRunsAHookAgainOverItsFinishedRun(t *testing.T) {
	c := newWaitCluster(t, "rerun-hooks")
	const origin = "rerun-hooks/web"
	tests := []struct {
		name string
		// earlier is the manifest of the object already there.
		earlier string
		outcome jobOutcome
		// hookOrigin is the client's (hook cleanup on when set).
		hookOrigin string
		runAgain   bool
	}{
		{name: "complete", earlier: hookJobManifest("%s", "post-install"), outcome: jobComplete, runAgain: true},
		{name: "failed", earlier: hookJobManifest("%s", "post-install"), outcome: jobFailed, runAgain: true},
		{name: "still running: left to finish", earlier: hookJobManifest("%s", "post-install"), outcome: jobRunning},
		{name: "not a hook", earlier: jobManifest("%s", false), outcome: jobComplete},
		{name: "a hook of other events", earlier: hookJobManifest("%s", "pre-install"), outcome: jobComplete},
		{name: "marked as another release's", earlier: hookJobManifest("%s", "post-install",
			hookcleanup.OriginAnnotation+": other/web"), outcome: jobComplete, hookOrigin: origin},
		{name: "said to be kept", earlier: hookJobManifest("%s", "post-install", "helm.sh/resource-policy: keep"), outcome: jobComplete},
		{name: "marked as this release's", earlier: hookJobManifest("%s", "post-install",
			hookcleanup.OriginAnnotation+": "+origin), outcome: jobComplete, hookOrigin: origin, runAgain: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			name := fmt.Sprintf("hook-%d", i)
			other := NewClient(c.getter, NewFieldValidation())
			other.Namespace = c.ns
			if _, err := other.Create(c.build(t, fmt.Sprintf(tt.earlier, name))); err != nil {
				t.Fatal(err)
			}
			c.setJob(t, name, tt.outcome)
			before, err := c.cs.BatchV1().Jobs(c.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			kc := NewClient(c.getter, NewFieldValidation())
			kc.Namespace, kc.HookOrigin = c.ns, tt.hookOrigin
			list := c.build(t, hookJobManifest(name, "post-install"))
			if _, err := kc.Create(list, helmkube.ClientCreateOptionServerSideApply(true, false)); err != nil {
				t.Fatal(err)
			}
			after, err := c.cs.BatchV1().Jobs(c.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ranAgain := after.UID != before.UID
			switch {
			case tt.runAgain && !ranAgain:
				t.Errorf("the earlier run (uid %s, %d conditions) is still there: the hook did not run again", after.UID, len(after.Status.Conditions))
			case tt.runAgain && len(after.Status.Conditions) > 0:
				t.Errorf("the new run already has an outcome: %+v", after.Status.Conditions)
			case !tt.runAgain && ranAgain:
				t.Errorf("the earlier Job was deleted and made again (uid %s → %s); want it left", before.UID, after.UID)
			}
		})
	}
}

// A finished hook Pod left by an earlier run is run again too.
func TestCreateRunsAHookPodAgainOverItsFinishedRun(t *testing.T) {
	c := newWaitCluster(t, "rerun-hook-pods")
	ctx := context.Background()
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: check
  annotations:
    helm.sh/hook: test
spec:
  restartPolicy: Never
  containers:
  - name: run
    image: example.invalid/run:1
`
	c.create(t, c.build(t, manifest))
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, "check", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if pod, err = c.cs.CoreV1().Pods(c.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.create(t, c.build(t, manifest))
	after, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, "check", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID == pod.UID || after.Status.Phase == corev1.PodSucceeded {
		t.Errorf("the earlier Pod (uid %s, phase %s) is still there; want a new run", after.UID, after.Status.Phase)
	}
}
