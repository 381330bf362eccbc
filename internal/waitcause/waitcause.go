// Package waitcause says why a workload a readiness wait named is not
// ready. Upstream's message of a failed wait names the workload and its
// kstatus status; what holds it back is in its pods: a Secret or ConfigMap
// that does not exist, an image that cannot be pulled, a crash loop, no
// node to run on, a readiness probe that fails, a Job's pod that failed.
//
// Find reads only after a wait failed, and only a bounded amount: each
// named workload (at most maxWorkloads), one namespaced list of its pods
// by its label selector (at most maxPods), and the metadata of the
// Secrets and ConfigMaps those pods name (at most maxLookups GETs, never
// their data). Anything it cannot read it leaves out: a cause is a help,
// never a reason to fail differently.
package waitcause

import (
	"context"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/kubewait"
)

const (
	// maxWorkloads is how many named workloads are looked at.
	maxWorkloads = 5
	// maxPods is how many pods of one workload are listed.
	maxPods = 20
	// maxCauses is how many different causes one workload gets.
	maxCauses = 3
	// maxLookups is how many Secrets and ConfigMaps are looked up.
	maxLookups = 10
	// maxText bounds a message copied from the cluster (the scheduler's,
	// the kubelet's), so that causes stay short beside upstream's words.
	maxText = 240
)

// Find returns, one line each, why the workloads among objects (those a
// failed wait named) are not ready, judged against rel: the first blocking
// cause of a few of each workload's pods, pods with the same cause
// counted together. Objects of other kinds are passed over.
func Find(ctx context.Context, c client.Reader, objects []kubewait.NotReady, rel Release) []string {
	f := &finder{c: c, rel: rel, exists: map[string]bool{}}
	var out []string
	looked := 0
	for _, o := range objects {
		if looked == maxWorkloads {
			break
		}
		if !workloadKinds[o.Kind] || o.Namespace == "" {
			continue
		}
		// Every GET counts, also of a workload that is gone.
		looked++
		if sel, ok := f.selector(ctx, o); ok {
			out = append(out, f.workload(ctx, o, sel)...)
		}
	}
	return out
}

// workloadKinds are the kinds whose pods Find looks at.
var workloadKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true, "ReplicaSet": true, "Job": true}

type finder struct {
	c   client.Reader
	rel Release
	// exists remembers the Secrets and ConfigMaps looked up, by
	// Kind/namespace/name.
	exists  map[string]bool
	lookups int
}

// selector reads the workload o names and returns its pods' selector; ok
// is false when o is no workload or cannot be read.
func (f *finder) selector(ctx context.Context, o kubewait.NotReady) (*metav1.LabelSelector, bool) {
	var obj client.Object
	switch o.Kind {
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "ReplicaSet":
		obj = &appsv1.ReplicaSet{}
	case "Job":
		obj = &batchv1.Job{}
	default:
		return nil, false
	}
	if o.Namespace == "" || f.c.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, obj) != nil {
		return nil, false
	}
	var sel *metav1.LabelSelector
	switch w := obj.(type) {
	case *appsv1.Deployment:
		sel = w.Spec.Selector
	case *appsv1.StatefulSet:
		sel = w.Spec.Selector
	case *appsv1.DaemonSet:
		sel = w.Spec.Selector
	case *appsv1.ReplicaSet:
		sel = w.Spec.Selector
	case *batchv1.Job:
		sel = w.Spec.Selector
	}
	// An empty selector would select every pod of the namespace.
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil, false
	}
	return sel, true
}

// found is the first blocking cause of one pod.
type found struct {
	// text says it, without the pod.
	text string
	// missing is the Secret or ConfigMap the pod waits for, if that is
	// the cause.
	missing *ref
}

// workload returns the causes of the pods of o that sel selects.
func (f *finder) workload(ctx context.Context, o kubewait.NotReady, sel *metav1.LabelSelector) []string {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil
	}
	var pods corev1.PodList
	if err := f.c.List(ctx, &pods, client.InNamespace(o.Namespace),
		client.MatchingLabelsSelector{Selector: selector}, client.Limit(maxPods)); err != nil {
		return nil
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })

	// Pods with the same cause are one line: the first pod, and how many
	// more.
	type group struct {
		pod   string
		cause found
		more  int
	}
	var groups []*group
	byText := map[string]*group{}
	for i := range items {
		pod := &items[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		cause, ok := f.pod(ctx, pod)
		if !ok {
			continue
		}
		if g := byText[cause.text]; g != nil {
			g.more++
			continue
		}
		if len(groups) == maxCauses {
			continue
		}
		g := &group{pod: pod.Name, cause: cause}
		groups = append(groups, g)
		byText[cause.text] = g
	}
	out := make([]string, 0, len(groups))
	for _, g := range groups {
		out = append(out, f.say(o, g.pod, g.more, g.cause))
	}
	return out
}

// say words the cause of pod (and more pods like it) of workload o.
func (f *finder) say(o kubewait.NotReady, pod string, more int, cause found) string {
	subject := "pod " + pod
	switch {
	case more == 1:
		subject += " (and 1 other pod)"
	case more > 1:
		subject += fmt.Sprintf(" (and %d other pods)", more)
	}
	if m := cause.missing; m != nil && f.deadlock(o, m) {
		runs := fmt.Sprintf("%d %s hooks run", f.rel.PendingPostHooks, f.rel.PostEvent)
		if f.rel.PendingPostHooks == 1 {
			runs = fmt.Sprintf("1 %s hook runs", f.rel.PostEvent)
		}
		// What a hook creates is not known: the sentence says what is.
		return kubewait.OneLine(fmt.Sprintf("%s waits for %s %s, which no object of this release creates; "+
			"%s after this wait; if one of them creates %s, set waitStrategy: afterHooks",
			subject, m.kind, m.name, runs, m.name))
	}
	return kubewait.OneLine(subject + ": " + cause.text)
}

// deadlock tells whether a pod of workload o waiting for the missing m may
// be waiting for a post hook: o is an object of the release (not a hook),
// no object of the release makes m, and post hooks are still to run after
// the wait that failed.
func (f *finder) deadlock(o kubewait.NotReady, m *ref) bool {
	return f.rel.PendingPostHooks > 0 &&
		f.rel.Made[o.ID()] &&
		!f.rel.Made[m.kind+"/"+m.namespace+"/"+m.name]
}

// pod returns the first blocking cause of pod, or false when it has none
// that this package knows.
func (f *finder) pod(ctx context.Context, pod *corev1.Pod) (found, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return found{text: "cannot be scheduled: " + short(c.Message)}, true
		}
	}
	statuses := append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	for _, s := range statuses {
		if w := s.State.Waiting; w != nil && pullFailure[w.Reason] {
			text := fmt.Sprintf("cannot pull image %q of container %s (%s", s.Image, s.Name, w.Reason)
			if m := short(w.Message); m != "" {
				text += ": " + m
			}
			return found{text: text + ")"}, true
		}
	}
	if pod.Status.Phase == corev1.PodPending {
		if m := f.missing(ctx, pod); m != nil {
			return found{text: fmt.Sprintf("waits for %s %s, which does not exist", m.kind, m.name), missing: m}, true
		}
	}
	for _, s := range statuses {
		w := s.State.Waiting
		if w == nil {
			continue
		}
		if w.Reason == "CrashLoopBackOff" {
			text := "container " + s.Name + " is crash-looping"
			if t := s.LastTerminationState.Terminated; t != nil {
				text += fmt.Sprintf(": it last ended with %s, exit code %d", reasonOr(t.Reason, "without a reason"), t.ExitCode)
			}
			return found{text: text}, true
		}
		if cannotStart[w.Reason] {
			text := fmt.Sprintf("container %s cannot start (%s", s.Name, w.Reason)
			if m := short(w.Message); m != "" {
				text += ": " + m
			}
			return found{text: text + ")"}, true
		}
	}
	if pod.Status.Phase == corev1.PodFailed {
		text := "failed"
		for _, s := range statuses {
			if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
				text += fmt.Sprintf(": container %s ended with %s, exit code %d", s.Name, reasonOr(t.Reason, "without a reason"), t.ExitCode)
				break
			}
		}
		if len(text) == len("failed") && pod.Status.Reason != "" {
			text += ": " + pod.Status.Reason
			if m := short(pod.Status.Message); m != "" {
				text += " (" + m + ")"
			}
		}
		return found{text: text}, true
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.State.Running != nil && !s.Ready {
			text := "container " + s.Name + " runs but is not ready"
			if probed(pod, s.Name) {
				text += ": its readiness probe fails"
			}
			return found{text: text}, true
		}
	}
	return found{}, false
}

// pullFailure are the kubelet's reasons for a container whose image it
// cannot pull.
var pullFailure = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true}

// cannotStart are the kubelet's reasons for a container it could not
// create or start; a missing Secret or ConfigMap is told before them.
var cannotStart = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// probed tells whether container name of pod has a readiness probe.
func probed(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return c.ReadinessProbe != nil
		}
	}
	return false
}

func reasonOr(reason, otherwise string) string {
	if reason == "" {
		return otherwise
	}
	return reason
}

// short is s on one line, cut to maxText characters.
func short(s string) string {
	s = kubewait.OneLine(s)
	if r := []rune(s); len(r) > maxText {
		return string(r[:maxText]) + "…"
	}
	return s
}

// ref is a Secret or ConfigMap a pod needs to start.
type ref struct {
	kind, namespace, name string
}

// missing returns the first Secret or ConfigMap pod needs that does not
// exist, or nil. A reference marked optional is not needed.
func (f *finder) missing(ctx context.Context, pod *corev1.Pod) *ref {
	for _, r := range needs(pod) {
		if !f.exist(ctx, r) {
			return &r
		}
	}
	return nil
}

// exist tells whether r exists, by a GET of its metadata only (never a
// Secret's data). What cannot be told (a lookup past maxLookups, a
// refused or failed read) counts as existing: only a NotFound is a cause.
func (f *finder) exist(ctx context.Context, r ref) bool {
	key := r.kind + "/" + r.namespace + "/" + r.name
	if e, seen := f.exists[key]; seen {
		return e
	}
	if f.lookups == maxLookups {
		return true
	}
	f.lookups++
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(r.kind))
	err := f.c.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: r.name}, meta)
	f.exists[key] = !apierrors.IsNotFound(err)
	return f.exists[key]
}

// needs lists the Secrets and ConfigMaps pod cannot start without, in the
// order of its spec: volumes, then each container's envFrom and env.
func needs(pod *corev1.Pod) []ref {
	var out []ref
	add := func(kind, name string, optional *bool) {
		if name == "" || (optional != nil && *optional) {
			return
		}
		r := ref{kind: kind, namespace: pod.Namespace, name: name}
		for _, have := range out {
			if have == r {
				return
			}
		}
		out = append(out, r)
	}
	for _, v := range pod.Spec.Volumes {
		if s := v.Secret; s != nil {
			add("Secret", s.SecretName, s.Optional)
		}
		if c := v.ConfigMap; c != nil {
			add("ConfigMap", c.Name, c.Optional)
		}
		if p := v.Projected; p != nil {
			for _, src := range p.Sources {
				if s := src.Secret; s != nil {
					add("Secret", s.Name, s.Optional)
				}
				if c := src.ConfigMap; c != nil {
					add("ConfigMap", c.Name, c.Optional)
				}
			}
		}
	}
	containers := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range containers {
		for _, e := range c.EnvFrom {
			if s := e.SecretRef; s != nil {
				add("Secret", s.Name, s.Optional)
			}
			if cm := e.ConfigMapRef; cm != nil {
				add("ConfigMap", cm.Name, cm.Optional)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if s := e.ValueFrom.SecretKeyRef; s != nil {
				add("Secret", s.Name, s.Optional)
			}
			if cm := e.ValueFrom.ConfigMapKeyRef; cm != nil {
				add("ConfigMap", cm.Name, cm.Optional)
			}
		}
	}
	return out
}
