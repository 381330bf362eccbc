package simulator

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testPod is a scheduled, pending pod of a Deployment-like workload that
// mounts the Secret "db".
func testPod(mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			NodeName:      "kwok-node-0",
			RestartPolicy: corev1.RestartPolicyAlways,
			Containers:    []corev1.Container{{Name: "app", Image: "app:1"}},
			Volumes: []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{
				Secret: &corev1.SecretVolumeSource{SecretName: "db"},
			}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func annotate(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func restartPolicy(policy corev1.RestartPolicy) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.RestartPolicy = policy }
}

func startedAt(t time.Time) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		p.Status.StartTime = &metav1.Time{Time: t}
	}
}

const secretManifest = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: made\n"

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	withSecret := fakeLookup(map[string][]string{"Secret/ns/db": {"password"}})
	withoutSecret := fakeLookup(nil)
	missingMessage := `MountVolume.SetUp failed for volume "creds": secret "db" not found`

	tests := []struct {
		name        string
		pod         *corev1.Pod
		lookup      lookupFunc
		want        decision
		wantCreates int
		// wantMessage is matched as a substring when set.
		wantMessage string
	}{
		{
			name:   "unscheduled pod is left alone",
			pod:    testPod(func(p *corev1.Pod) { p.Spec.NodeName = "" }),
			lookup: withSecret,
		},
		{
			name:   "deleting pod is left alone",
			pod:    testPod(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }),
			lookup: withoutSecret,
		},
		{
			name:   "terminal pod is left alone",
			pod:    testPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			lookup: withoutSecret,
		},
		{
			name:   "ready pod stays ready after its secret is deleted",
			pod:    testPod(annotate(GateAnnotation, GateReady)),
			lookup: withoutSecret,
		},
		{
			name:   "missing secret blocks",
			pod:    testPod(),
			lookup: withoutSecret,
			want:   decision{gate: GateBlocked, reason: ReasonContainerCreating, message: missingMessage},
		},
		{
			name: "already blocked for the same reason: no write",
			pod: testPod(annotate(GateAnnotation, GateBlocked,
				WaitingReasonAnnotation, ReasonContainerCreating, WaitingMessageAnnotation, missingMessage)),
			lookup: withoutSecret,
		},
		{
			name: "blocked for another reason: rewrite",
			pod: testPod(annotate(GateAnnotation, GateBlocked,
				WaitingReasonAnnotation, ReasonConfigError, WaitingMessageAnnotation, "old")),
			lookup: withoutSecret,
			want:   decision{gate: GateBlocked, reason: ReasonContainerCreating, message: missingMessage},
		},
		{
			name:   "secret present: ready",
			pod:    testPod(),
			lookup: withSecret,
			want:   decision{gate: GateReady},
		},
		{
			name:   "image that cannot be pulled blocks with kubelet's back-off",
			pod:    testPod(annotate(FailAnnotation, FailImagePull)),
			lookup: withSecret,
			want:   decision{gate: GateBlocked, reason: ReasonImagePullBackOff, message: `Back-off pulling image "app:1"`},
		},
		{
			name:   "image pull of a Job's pod blocks too, whatever its restartPolicy",
			pod:    testPod(restartPolicy(corev1.RestartPolicyNever), annotate(FailAnnotation, FailImagePull, CreatesAnnotation, secretManifest)),
			lookup: withSecret,
			want:   decision{gate: GateBlocked, reason: ReasonImagePullBackOff, message: `Back-off pulling image "app:1"`},
		},
		{
			name:   "a missing volume is waited for before the image is pulled",
			pod:    testPod(annotate(FailAnnotation, FailImagePull)),
			lookup: withoutSecret,
			want:   decision{gate: GateBlocked, reason: ReasonContainerCreating, message: missingMessage},
		},
		{
			name:   "blocked pod whose secret appeared: ready",
			pod:    testPod(annotate(GateAnnotation, GateBlocked)),
			lookup: withSecret,
			want:   decision{gate: GateReady},
		},
		{
			name:        "invalid annotation blocks with an explanation",
			pod:         testPod(annotate(DelayAnnotation, "soon")),
			lookup:      withSecret,
			want:        decision{gate: GateBlocked, reason: ReasonInvalidAnnotation},
			wantMessage: DelayAnnotation,
		},
		{
			name:   "bare pod with restartPolicy Never completes",
			pod:    testPod(restartPolicy(corev1.RestartPolicyNever)),
			lookup: withSecret,
			want:   decision{gate: GateComplete},
		},
		{
			name:        "job pod creates its objects and completes",
			pod:         testPod(restartPolicy(corev1.RestartPolicyOnFailure), annotate(CreatesAnnotation, secretManifest)),
			lookup:      withSecret,
			want:        decision{gate: GateComplete},
			wantCreates: 1,
		},
		{
			name:        "long-running pod creates its objects and becomes ready",
			pod:         testPod(annotate(CreatesAnnotation, secretManifest)),
			lookup:      withSecret,
			want:        decision{gate: GateReady},
			wantCreates: 1,
		},
		{
			name:   "missing input wins over declared objects",
			pod:    testPod(restartPolicy(corev1.RestartPolicyNever), annotate(CreatesAnnotation, secretManifest)),
			lookup: withoutSecret,
			want:   decision{gate: GateBlocked, reason: ReasonContainerCreating, message: missingMessage},
		},
		{
			name:   "failing pod creates nothing",
			pod:    testPod(restartPolicy(corev1.RestartPolicyNever), annotate(FailAnnotation, FailExit, CreatesAnnotation, secretManifest)),
			lookup: withSecret,
			want:   decision{gate: GateFail},
		},
		{
			name: "required object missing at start: the program fails, creating nothing",
			pod: testPod(restartPolicy(corev1.RestartPolicyNever),
				annotate(RequiresAnnotation, "Secret/endpoint", CreatesAnnotation, secretManifest)),
			lookup: withSecret,
			want:   decision{gate: GateFail},
		},
		{
			name: "required objects there: the program runs",
			pod: testPod(restartPolicy(corev1.RestartPolicyNever),
				annotate(RequiresAnnotation, "Secret/db, ConfigMap/settings", CreatesAnnotation, secretManifest)),
			lookup:      fakeLookup(map[string][]string{"Secret/ns/db": {"password"}, "ConfigMap/ns/settings": nil}),
			want:        decision{gate: GateComplete},
			wantCreates: 1,
		},
		{
			name:   "a missing volume still waits before the program can start",
			pod:    testPod(restartPolicy(corev1.RestartPolicyNever), annotate(RequiresAnnotation, "Secret/endpoint")),
			lookup: withoutSecret,
			want:   decision{gate: GateBlocked, reason: ReasonContainerCreating, message: missingMessage},
		},
		{
			name:        "a malformed requirement blocks with an explanation",
			pod:         testPod(annotate(RequiresAnnotation, "Service/db")),
			lookup:      withSecret,
			want:        decision{gate: GateBlocked, reason: ReasonInvalidAnnotation},
			wantMessage: RequiresAnnotation,
		},
		{
			name:   "crash loop",
			pod:    testPod(annotate(FailAnnotation, FailCrashLoop)),
			lookup: withSecret,
			want:   decision{gate: GateCrashLoop},
		},
		{
			name:   "slow pod starts first",
			pod:    testPod(annotate(DelayAnnotation, "10s")),
			lookup: withSecret,
			want:   decision{gate: GateStarted, requeueAfter: 10 * time.Second},
		},
		{
			name:   "slow pod still blocks on its secret",
			pod:    testPod(annotate(DelayAnnotation, "10s")),
			lookup: withoutSecret,
			want:   decision{gate: GateBlocked, reason: ReasonContainerCreating, message: missingMessage},
		},
		{
			name:   "started pod waits for kwok's start time",
			pod:    testPod(annotate(DelayAnnotation, "10s", GateAnnotation, GateStarted)),
			lookup: withSecret,
			want:   decision{requeueAfter: startPoll},
		},
		{
			name:   "started pod waits out the rest of its delay",
			pod:    testPod(annotate(DelayAnnotation, "10s", GateAnnotation, GateStarted), startedAt(now.Add(-4*time.Second))),
			lookup: withSecret,
			want:   decision{requeueAfter: 6 * time.Second},
		},
		{
			name:   "started pod becomes ready after its delay",
			pod:    testPod(annotate(DelayAnnotation, "10s", GateAnnotation, GateStarted), startedAt(now.Add(-10*time.Second))),
			lookup: withoutSecret,
			want:   decision{gate: GateReady},
		},
		{
			name: "slow job pod creates its objects when it completes",
			pod: testPod(restartPolicy(corev1.RestartPolicyNever),
				annotate(DelayAnnotation, "3s", GateAnnotation, GateStarted, CreatesAnnotation, secretManifest),
				startedAt(now.Add(-time.Minute))),
			lookup:      withSecret,
			want:        decision{gate: GateComplete},
			wantCreates: 1,
		},
		{
			name: "slow failing job pod fails after its delay",
			pod: testPod(restartPolicy(corev1.RestartPolicyNever),
				annotate(DelayAnnotation, "3s", GateAnnotation, GateStarted, FailAnnotation, FailExit),
				startedAt(now.Add(-time.Minute))),
			lookup: withSecret,
			want:   decision{gate: GateFail},
		},
		{
			name: "started pod whose annotations broke fails",
			pod: testPod(restartPolicy(corev1.RestartPolicyNever),
				annotate(DelayAnnotation, "3 seconds", GateAnnotation, GateStarted),
				startedAt(now.Add(-time.Minute))),
			lookup: withSecret,
			want:   decision{gate: GateFail},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.pod, tt.lookup, now)
			if len(got.creates) != tt.wantCreates {
				t.Errorf("creates %d objects, want %d", len(got.creates), tt.wantCreates)
			}
			if tt.wantMessage != "" {
				if !strings.Contains(got.message, tt.wantMessage) {
					t.Errorf("message %q does not contain %q", got.message, tt.wantMessage)
				}
				got.message = ""
			}
			got.creates = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("decide() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNeedsWork(t *testing.T) {
	tests := []struct {
		gate string
		want bool
	}{
		{"", true},
		{GateBlocked, true},
		{GateStarted, true},
		{GateReady, false},
		{GateComplete, false},
		{GateFail, false},
		{GateCrashLoop, false},
	}
	for _, tt := range tests {
		pod := testPod(annotate(GateAnnotation, tt.gate))
		if tt.gate == "" {
			delete(pod.Annotations, GateAnnotation)
		}
		if got := needsWork(pod); got != tt.want {
			t.Errorf("needsWork(gate %q) = %v, want %v", tt.gate, got, tt.want)
		}
	}
	if needsWork(testPod(func(p *corev1.Pod) { p.Spec.NodeName = "" })) {
		t.Error("an unscheduled pod needs no work")
	}
}
