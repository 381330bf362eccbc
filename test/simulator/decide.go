package simulator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// startPoll is how soon a started pod is looked at again while kwok has not
// yet recorded its start time.
const startPoll = time.Second

// decision is what the simulator does next for one pod. The zero value means
// "nothing now".
type decision struct {
	// gate is the new GateAnnotation value; empty leaves the pod as it is.
	gate string
	// reason and message explain a GateBlocked pod's wait.
	reason, message string
	// creates are created before the gate is set.
	creates []*unstructured.Unstructured
	// requeueAfter asks to look at the pod again later.
	requeueAfter time.Duration
}

// decide moves a pod along blocked -> started -> ready|complete|fail|crashloop.
// Pods only move forward: like a kubelet, the simulator does not stop a
// running container because its Secret was deleted afterwards.
func decide(pod *corev1.Pod, lookup lookupFunc, now time.Time) decision {
	if !active(pod) {
		return decision{}
	}
	switch pod.Annotations[GateAnnotation] {
	case "", GateBlocked:
		return decideBeforeStart(pod, lookup)
	case GateStarted:
		return decideAfterStart(pod, now)
	default:
		return decision{}
	}
}

// active reports whether the pod is on a node, alive and not yet terminal.
func active(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil {
		return false
	}
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// needsWork reports whether the pod may still change gate on its own, so the
// periodic resync has to look at it.
func needsWork(pod *corev1.Pod) bool {
	if !active(pod) {
		return false
	}
	switch pod.Annotations[GateAnnotation] {
	case "", GateBlocked, GateStarted:
		return true
	default:
		return false
	}
}

func decideBeforeStart(pod *corev1.Pod, lookup lookupFunc) decision {
	b, err := parseBehaviour(pod.Annotations)
	if err != nil {
		return block(pod, ReasonInvalidAnnotation, err.Error())
	}
	deps := podDependencies(&pod.Spec)
	if b.fail == FailImagePull {
		// A kubelet mounts the volumes before it pulls the images, and
		// reads the env sources only after: a missing volume is what the
		// pod waits for first, the image after it.
		if reason, message, missing := firstMissing(pod.Namespace, volumesOnly(deps), lookup); missing {
			return block(pod, reason, message)
		}
		return block(pod, ReasonImagePullBackOff, fmt.Sprintf("Back-off pulling image %q", firstImage(&pod.Spec)))
	}
	if reason, message, missing := firstMissing(pod.Namespace, deps, lookup); missing {
		return block(pod, reason, message)
	}
	if _, _, missing := firstMissing(pod.Namespace, b.requires, lookup); missing {
		// The program started and gave up: no waiting, no objects made.
		return decision{gate: outcome(pod.Spec.RestartPolicy, FailExit)}
	}
	if b.delay > 0 {
		return decision{gate: GateStarted, requeueAfter: b.delay}
	}
	return finish(pod, b)
}

// block returns a GateBlocked decision unless the pod already says exactly
// that, so that an unchanged wait costs no write.
func block(pod *corev1.Pod, reason, message string) decision {
	a := pod.Annotations
	if a[GateAnnotation] == GateBlocked && a[WaitingReasonAnnotation] == reason && a[WaitingMessageAnnotation] == message {
		return decision{}
	}
	return decision{gate: GateBlocked, reason: reason, message: message}
}

// decideAfterStart measures the delay from the start time kwok recorded, so
// the simulator keeps no state of its own and survives restarts.
func decideAfterStart(pod *corev1.Pod, now time.Time) decision {
	b, err := parseBehaviour(pod.Annotations)
	if err != nil {
		// The annotations changed after the pod started; a started pod can no
		// longer go back to waiting, so the typo surfaces as a failure.
		return decision{gate: outcome(pod.Spec.RestartPolicy, FailExit)}
	}
	if pod.Status.StartTime == nil {
		return decision{requeueAfter: startPoll}
	}
	if left := pod.Status.StartTime.Add(b.delay).Sub(now); left > 0 {
		return decision{requeueAfter: left}
	}
	return finish(pod, b)
}

// finish picks the final gate; only a successful pod creates its objects.
func finish(pod *corev1.Pod, b behaviour) decision {
	gate := outcome(pod.Spec.RestartPolicy, b.fail)
	d := decision{gate: gate}
	if gate == GateReady || gate == GateComplete {
		d.creates = b.creates
	}
	return d
}

// volumesOnly are the dependencies of deps that volumes have.
func volumesOnly(deps []dependency) []dependency {
	var out []dependency
	for _, d := range deps {
		if d.volume != "" {
			out = append(out, d)
		}
	}
	return out
}

// firstImage is the image a kubelet pulls first: the first init
// container's, else the first container's.
func firstImage(spec *corev1.PodSpec) string {
	if len(spec.InitContainers) > 0 {
		return spec.InitContainers[0].Image
	}
	if len(spec.Containers) > 0 {
		return spec.Containers[0].Image
	}
	return ""
}
