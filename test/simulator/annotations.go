// Package simulator is a test double for application behaviour on the local
// test cluster. kwok plays the kubelet for fake nodes; this package supplies
// kwok's Stage set and a small controller that decides, per pod, when and how
// the pod may proceed (become ready, complete, fail or crash loop). Pods take
// part through sim.afterhooks.io/ annotations, documented in test/e2e/README.md.
package simulator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// AnnotationPrefix is shared by every annotation the simulator reads or writes.
const AnnotationPrefix = "sim.afterhooks.io/"

// Annotations users put on a pod, or on the pod template of a Deployment or Job.
const (
	// DelayAnnotation holds a Go duration the pod spends running but not ready
	// (or not yet completed) after its inputs exist.
	DelayAnnotation = AnnotationPrefix + "delay"
	// FailAnnotation declares the pod failing; see FailCrashLoop and FailExit.
	FailAnnotation = AnnotationPrefix + "fail"
	// CreatesAnnotation holds one or more YAML or JSON manifests the simulator
	// creates right before the pod becomes ready or completes.
	CreatesAnnotation = AnnotationPrefix + "creates"
	// RequiresAnnotation lists, comma-separated as Kind/name (Secret or
	// ConfigMap, in the pod's namespace), what the pod's program looks up
	// once it runs, such as a migration reaching its database: if one is
	// missing when the pod starts, the program exits with an error and the
	// pod fails per its restartPolicy, instead of waiting as for a missing
	// volume. Charts that apply everything at once trip over it; ordered
	// ones do not.
	RequiresAnnotation = AnnotationPrefix + "requires"
)

// Values of FailAnnotation.
const (
	// FailCrashLoop makes every container restart forever; the pod never
	// becomes ready and never terminates, whatever its restartPolicy.
	FailCrashLoop = "crashloop"
	// FailExit makes the containers exit with code 1 and leaves the outcome
	// to restartPolicy as a kubelet would: Never ends in phase Failed,
	// OnFailure and Always crash loop (a Job counts the restarts).
	FailExit = "exit"
	// FailImagePull makes the pod's image one that cannot be pulled: the pod
	// stays Pending, its containers waiting in ImagePullBackOff with
	// kubelet's message, whatever its restartPolicy.
	FailImagePull = "image-pull"
)

// Annotations the simulator writes on pods. kwok's stages key off GateAnnotation.
const (
	GateAnnotation           = AnnotationPrefix + "gate"
	WaitingReasonAnnotation  = AnnotationPrefix + "waiting-reason"
	WaitingMessageAnnotation = AnnotationPrefix + "waiting-message"
)

// Values of GateAnnotation. Each selects exactly one kwok pod stage.
const (
	GateBlocked   = "blocked"
	GateStarted   = "started"
	GateReady     = "ready"
	GateComplete  = "complete"
	GateFail      = "fail"
	GateCrashLoop = "crashloop"
)

// ReasonInvalidAnnotation is the waiting reason of a pod whose sim.afterhooks.io
// annotations cannot be parsed; the message says what is wrong.
const ReasonInvalidAnnotation = "InvalidSimulatorAnnotation"

// behaviour is what a pod's annotations ask of the simulator.
type behaviour struct {
	delay    time.Duration
	fail     string
	creates  []*unstructured.Unstructured
	requires []dependency
}

// parseBehaviour reads the user-facing annotations. Errors name the
// annotation so that a pod's waiting message explains a typo.
func parseBehaviour(annotations map[string]string) (behaviour, error) {
	var b behaviour
	if v, ok := annotations[DelayAnnotation]; ok {
		d, err := parseDelay(v)
		if err != nil {
			return behaviour{}, fmt.Errorf("annotation %s: %w", DelayAnnotation, err)
		}
		b.delay = d
	}
	if v, ok := annotations[FailAnnotation]; ok {
		if v != FailCrashLoop && v != FailExit && v != FailImagePull {
			return behaviour{}, fmt.Errorf("annotation %s: %q is not %q, %q or %q",
				FailAnnotation, v, FailCrashLoop, FailExit, FailImagePull)
		}
		b.fail = v
	}
	if v, ok := annotations[CreatesAnnotation]; ok {
		objs, err := parseManifests([]byte(v))
		if err != nil {
			return behaviour{}, fmt.Errorf("annotation %s: %w", CreatesAnnotation, err)
		}
		b.creates = objs
	}
	if v, ok := annotations[RequiresAnnotation]; ok {
		deps, err := parseRequires(v)
		if err != nil {
			return behaviour{}, fmt.Errorf("annotation %s: %w", RequiresAnnotation, err)
		}
		b.requires = deps
	}
	return b, nil
}

// parseRequires reads "Secret/a, ConfigMap/b".
func parseRequires(v string) ([]dependency, error) {
	var deps []dependency
	for _, item := range strings.Split(v, ",") {
		kind, name, ok := strings.Cut(strings.TrimSpace(item), "/")
		if !ok || name == "" || (kind != kindSecret && kind != kindConfigMap) {
			return nil, fmt.Errorf("%q is not Secret/<name> or ConfigMap/<name>", strings.TrimSpace(item))
		}
		deps = append(deps, dependency{kind: kind, name: name})
	}
	return deps, nil
}

func parseDelay(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("invalid duration: %w", err)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %s is negative", v)
	}
	return d, nil
}

// parseManifests decodes a YAML stream (or JSON) into objects. Every object
// needs a fixed name: creation must be idempotent across retries, which
// generateName would defeat.
func parseManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		var raw map[string]any
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(raw) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{Object: raw}
		if err := checkManifest(obj); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		objs = append(objs, obj)
	}
	if len(objs) == 0 {
		return nil, errors.New("no manifest found")
	}
	return objs, nil
}

func checkManifest(obj *unstructured.Unstructured) error {
	if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
		return errors.New("apiVersion and kind are required")
	}
	if _, err := schema.ParseGroupVersion(obj.GetAPIVersion()); err != nil {
		return fmt.Errorf("apiVersion: %w", err)
	}
	if obj.GetName() == "" {
		return fmt.Errorf("%s needs metadata.name", obj.GetKind())
	}
	return nil
}

// outcome is the gate a pod ends in once it may proceed, following kubelet
// semantics for restartPolicy.
func outcome(policy corev1.RestartPolicy, fail string) string {
	switch {
	case fail == FailCrashLoop:
		return GateCrashLoop
	case fail == FailExit && policy == corev1.RestartPolicyNever:
		return GateFail
	case fail == FailExit:
		return GateCrashLoop
	case policy == corev1.RestartPolicyNever || policy == corev1.RestartPolicyOnFailure:
		return GateComplete
	default:
		return GateReady
	}
}
