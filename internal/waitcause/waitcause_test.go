package waitcause

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/afterhooks/helm-controller/internal/kubewait"
	"github.com/afterhooks/helm-controller/internal/scheme"
)

const ns = "apps"

var webLabels = map[string]string{"app": "web"}

func deployment(name string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
}

// pod is a pod of the web Deployment, changed by each of edits.
func pod(name string, edits ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: webLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}},
	}
	for _, e := range edits {
		e(p)
	}
	return p
}

func secretVolume(name string, optional bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: name, Optional: &optional}}})
	}
}

func configMapEnvFrom(name string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].EnvFrom = append(p.Spec.Containers[0].EnvFrom, corev1.EnvFromSource{
			ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
	}
}

func secretKeyEnv(name string, optional bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "password", Optional: &optional}}})
	}
}

func waiting(reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	}
}

func crashLooping(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "web:1", RestartCount: 4,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3}}}}
}

func unschedulable(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.\npreemption: not helpful"}}
}

func runningNotReady(probe bool) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		if probe {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "web:1",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}
}

func ready(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "web:1", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"password": []byte("s3cr3t")}}
}

var webNotReady = kubewait.NotReady{Kind: "Deployment", Namespace: ns, Name: "web", Status: "InProgress",
	Message: "Deployment does not have minimum availability."}

// release is a release whose manifest makes the web Deployment and made,
// with pending post-install hooks still to run.
func release(pending int, made ...string) Release {
	r := Release{Made: map[string]bool{"Deployment/apps/web": true}, PendingPostHooks: pending, PostEvent: releasev1.HookPostInstall}
	for _, m := range made {
		r.Made[m] = true
	}
	return r
}

func TestFindSaysWhyAWorkloadIsNotReady(t *testing.T) {
	failedJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate"},
		Spec: batchv1.JobSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "u1"}}}}
	failedPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"batch.kubernetes.io/controller-uid": "u1"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "migrate", Image: "migrate:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "migrate",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}}}}}
	}
	jobNotReady := kubewait.NotReady{Kind: "Job", Namespace: ns, Name: "migrate", Status: "Failed"}

	for _, tc := range []struct {
		name    string
		objects []client.Object
		named   []kubewait.NotReady
		rel     Release
		want    []string
	}{{
		name:    "a Secret volume that does not exist",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))},
		want:    []string{"pod web-7d9f: waits for Secret web-creds, which does not exist"},
	}, {
		name:    "a ConfigMap of envFrom that does not exist",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", configMapEnvFrom("web-config"), waiting("CreateContainerConfigError", `configmap "web-config" not found`))},
		want:    []string{"pod web-7d9f: waits for ConfigMap web-config, which does not exist"},
	}, {
		name:    "a Secret of env valueFrom that does not exist, after one that does",
		objects: []client.Object{deployment("web", webLabels), secret("web-tls"), pod("web-7d9f", secretVolume("web-tls", false), secretKeyEnv("web-db", false), waiting("CreateContainerConfigError", ""))},
		want:    []string{"pod web-7d9f: waits for Secret web-db, which does not exist"},
	}, {
		name:    "optional references are not needed",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", secretVolume("web-creds", true), secretKeyEnv("web-db", true), waiting("ContainerCreating", ""))},
	}, {
		name:    "a Secret that exists is no cause",
		objects: []client.Object{deployment("web", webLabels), secret("web-creds"), pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))},
	}, {
		name: "an image that cannot be pulled",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.invalid/web:9" },
			waiting("ImagePullBackOff", `Back-off pulling image "registry.invalid/web:9"`))},
		want: []string{`pod web-7d9f: cannot pull image "registry.invalid/web:9" of container web (ImagePullBackOff: Back-off pulling image "registry.invalid/web:9")`},
	}, {
		name:    "a crash loop",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", crashLooping)},
		want:    []string{"pod web-7d9f: container web is crash-looping: it last ended with Error, exit code 3"},
	}, {
		name:    "unschedulable",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", unschedulable)},
		want:    []string{"pod web-7d9f: cannot be scheduled: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: not helpful"},
	}, {
		name:    "running, its readiness probe failing",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", runningNotReady(true))},
		want:    []string{"pod web-7d9f: container web runs but is not ready: its readiness probe fails"},
	}, {
		name:    "running, not ready, without a probe",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", runningNotReady(false))},
		want:    []string{"pod web-7d9f: container web runs but is not ready"},
	}, {
		name:    "a container that cannot start for another reason",
		objects: []client.Object{deployment("web", webLabels), secret("web-creds"), pod("web-7d9f", secretKeyEnv("web-creds", false), waiting("CreateContainerConfigError", `couldn't find key password in Secret apps/web-creds`))},
		want:    []string{"pod web-7d9f: container web cannot start (CreateContainerConfigError: couldn't find key password in Secret apps/web-creds)"},
	}, {
		name:    "a Job's failed pods, counted together",
		objects: []client.Object{failedJob, failedPod("migrate-a"), failedPod("migrate-b")},
		named:   []kubewait.NotReady{jobNotReady},
		want:    []string{"pod migrate-a (and 1 other pod): failed: container migrate ended with Error, exit code 2"},
	}, {
		name: "pods with the same cause are one line, ready pods none",
		objects: []client.Object{deployment("web", webLabels), pod("web-a", crashLooping), pod("web-b", crashLooping), pod("web-c", crashLooping),
			pod("web-d", ready), pod("web-e", unschedulable)},
		want: []string{"pod web-a (and 2 other pods): container web is crash-looping: it last ended with Error, exit code 3",
			"pod web-e: cannot be scheduled: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: not helpful"},
	}, {
		name:    "pods of other workloads are not listed",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", ready), pod("api-1", crashLooping, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "api"} })},
	}, {
		name:    "other kinds are passed over",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", crashLooping)},
		named:   []kubewait.NotReady{{Kind: "Service", Namespace: ns, Name: "web", Status: "InProgress"}, {Kind: "Deployment", Namespace: ns, Name: "gone", Status: "NotFound"}},
	}, {
		name:    "the deadlock: a Secret no object makes, post hooks to run",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))},
		rel:     release(2),
		want: []string{"pod web-7d9f waits for Secret web-creds, which no object of this release creates; " +
			"2 post-install hooks run after this wait; if one of them creates web-creds, set waitStrategy: afterHooks"},
	}, {
		name:    "the deadlock with one post hook",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", configMapEnvFrom("web-config"), waiting("CreateContainerConfigError", ""))},
		rel:     release(1),
		want: []string{"pod web-7d9f waits for ConfigMap web-config, which no object of this release creates; " +
			"1 post-install hook runs after this wait; if one of them creates web-config, set waitStrategy: afterHooks"},
	}, {
		name:    "no post hook to run (afterHooks ran them): only the missing object",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))},
		rel:     release(0),
		want:    []string{"pod web-7d9f: waits for Secret web-creds, which does not exist"},
	}, {
		name:    "an object of the release makes the Secret: no deadlock",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))},
		rel:     release(2, "Secret/apps/web-creds"),
		want:    []string{"pod web-7d9f: waits for Secret web-creds, which does not exist"},
	}, {
		name:    "a workload the release does not make (a hook's): no deadlock",
		objects: []client.Object{deployment("web", webLabels), pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))},
		rel:     Release{Made: map[string]bool{}, PendingPostHooks: 2, PostEvent: releasev1.HookPostInstall},
		want:    []string{"pod web-7d9f: waits for Secret web-creds, which does not exist"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(tc.objects...).Build()
			named := tc.named
			if named == nil {
				named = []kubewait.NotReady{webNotReady}
			}
			got := Find(context.Background(), c, named, tc.rel)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			for _, g := range got {
				if strings.Contains(g, "\n") {
					t.Errorf("cause %q spans lines", g)
				}
			}
		})
	}
}

// countingReader counts the reads that reach the cluster, by kind of
// object, and refuses to read Secrets whole.
type countingReader struct {
	client.Reader
	gets, lists map[string]int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	kind := fmt.Sprintf("%T", obj)
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		kind = "metadata of " + m.Kind
	}
	if _, whole := obj.(*corev1.Secret); whole {
		return errors.New("read a Secret's data")
	}
	r.gets[kind]++
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	if lo.Namespace == "" || lo.LabelSelector == nil || lo.LabelSelector.Empty() || lo.Limit == 0 {
		return fmt.Errorf("unbounded list %+v", lo)
	}
	r.lists[fmt.Sprintf("%T", list)]++
	return r.Reader.List(ctx, list, opts...)
}

func TestFindReadsLittle(t *testing.T) {
	objects := []client.Object{}
	var named []kubewait.NotReady
	// Eight Deployments, each of whose pods needs twelve missing Secrets.
	for i := range 8 {
		name := fmt.Sprintf("web%d", i)
		labels := map[string]string{"app": name}
		objects = append(objects, deployment(name, labels))
		named = append(named, kubewait.NotReady{Kind: "Deployment", Namespace: ns, Name: name, Status: "InProgress"})
		edits := []func(*corev1.Pod){func(p *corev1.Pod) { p.Labels = labels }}
		for j := range 12 {
			edits = append(edits, secretVolume(fmt.Sprintf("s%d-%d", i, j), false))
		}
		objects = append(objects, pod(name+"-1", edits...))
	}
	r := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objects...).Build(),
		gets: map[string]int{}, lists: map[string]int{}}

	got := Find(context.Background(), r, named, Release{})
	if len(got) != maxWorkloads {
		t.Errorf("%d causes %q, want one for each of the first %d workloads", len(got), got, maxWorkloads)
	}
	if r.gets["*v1.Deployment"] != maxWorkloads || r.lists["*v1.PodList"] != maxWorkloads {
		t.Errorf("read %v and listed %v, want %d Deployments and as many pod lists", r.gets, r.lists, maxWorkloads)
	}
	if n := r.gets["metadata of Secret"]; n > maxLookups {
		t.Errorf("looked up %d Secrets, want at most %d", n, maxLookups)
	}

	// Workloads that are gone count too.
	r.gets, r.lists = map[string]int{}, map[string]int{}
	var gone []kubewait.NotReady
	for i := range 8 {
		gone = append(gone, kubewait.NotReady{Kind: "StatefulSet", Namespace: ns, Name: fmt.Sprintf("gone%d", i), Status: "NotFound"})
	}
	if got := Find(context.Background(), r, gone, Release{}); len(got) != 0 || r.gets["*v1.StatefulSet"] != maxWorkloads || len(r.lists) != 0 {
		t.Errorf("causes %q, read %v, listed %v for workloads that are gone; want %d GETs", got, r.gets, r.lists, maxWorkloads)
	}

	// Nothing named that is a workload: nothing read.
	r.gets, r.lists = map[string]int{}, map[string]int{}
	Find(context.Background(), r, []kubewait.NotReady{{Kind: "Service", Namespace: ns, Name: "web"}}, Release{})
	if len(r.gets)+len(r.lists) != 0 {
		t.Errorf("read %v and listed %v for a Service", r.gets, r.lists)
	}
}

func TestCausesFollowUpstreamsWordsOnOneLine(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(deployment("web", webLabels),
		pod("web-7d9f", secretVolume("web-creds", false), waiting("ContainerCreating", ""))).Build()
	waitErr := &kubewait.WaitError{Ending: kubewait.TimedOut, Objects: []kubewait.NotReady{webNotReady}, Err: context.DeadlineExceeded}
	failed := fmt.Errorf("release web failed: %w", waitErr)

	explained := kubewait.Explain(failed, Find(context.Background(), c, kubewait.NotReadyIn(failed), release(2)))
	const want = "release web failed: timeout waiting for: [Deployment/apps/web status: 'InProgress'] " +
		"(Deployment/apps/web: Deployment does not have minimum availability.; " +
		"pod web-7d9f waits for Secret web-creds, which no object of this release creates; " +
		"2 post-install hooks run after this wait; if one of them creates web-creds, set waitStrategy: afterHooks)"
	if explained.Error() != want {
		t.Errorf("got  %q\nwant %q", explained.Error(), want)
	}
	if !errors.Is(explained, context.DeadlineExceeded) {
		t.Error("the explained error lost the wait's deadline")
	}
}

func TestReleaseOf(t *testing.T) {
	rel := &releasev1.Release{Namespace: ns, Manifest: `---
# Source: web/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: web-tls
---
# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: other
`, Hooks: []*releasev1.Hook{
		{Name: "make-creds", Events: []releasev1.HookEvent{releasev1.HookPostInstall}},
		{Name: "seed", Events: []releasev1.HookEvent{releasev1.HookPostInstall, releasev1.HookPostUpgrade}},
		{Name: "ran", Events: []releasev1.HookEvent{releasev1.HookPostInstall}, LastRun: releasev1.HookExecution{Phase: releasev1.HookPhaseSucceeded}},
		{Name: "pre", Events: []releasev1.HookEvent{releasev1.HookPreInstall}},
	}}
	got := ReleaseOf(rel, releasev1.HookPostInstall, false)
	if !got.Made["Secret/apps/web-tls"] || !got.Made["Deployment/other/web"] || len(got.Made) != 2 {
		t.Errorf("made %v, want the Secret in the release namespace and the Deployment in its own", got.Made)
	}
	if got.PendingPostHooks != 2 || got.PostEvent != releasev1.HookPostInstall {
		t.Errorf("%d %s hooks pending, want the 2 that have not run", got.PendingPostHooks, got.PostEvent)
	}
	if up := ReleaseOf(rel, releasev1.HookPostUpgrade, false); up.PendingPostHooks != 1 {
		t.Errorf("%d post-upgrade hooks pending, want 1", up.PendingPostHooks)
	}
	if off := ReleaseOf(rel, releasev1.HookPostInstall, true); off.PendingPostHooks != 0 {
		t.Errorf("%d hooks pending with hooks disabled, want none", off.PendingPostHooks)
	}
	if none := ReleaseOf(nil, releasev1.HookPostInstall, false); len(none.Made) != 0 || none.PendingPostHooks != 0 {
		t.Errorf("a nil release gave %+v", none)
	}
}
