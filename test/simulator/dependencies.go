package simulator

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

const (
	kindSecret    = "Secret"
	kindConfigMap = "ConfigMap"
)

// Waiting reasons a kubelet reports for a pod whose inputs are missing:
// volumes are mounted before any container is created, so a missing volume
// source keeps the pod in ContainerCreating, while a missing env source only
// fails the container's configuration.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonConfigError       = "CreateContainerConfigError"
	// ReasonImagePullBackOff is a kubelet's reason for a container whose
	// image it failed to pull and tries again later.
	ReasonImagePullBackOff = "ImagePullBackOff"
)

// dependency is one Secret or ConfigMap (or one key of it) a pod cannot start
// without.
type dependency struct {
	kind string
	name string
	// key is empty when the whole object is needed.
	key string
	// volume is empty when the dependency comes from a container's env.
	volume string
}

// lookupFunc returns the data keys of a Secret or ConfigMap and whether it exists.
type lookupFunc func(kind, namespace, name string) (sets.Set[string], bool)

// podDependencies lists the non-optional Secrets and ConfigMaps a pod needs,
// volume sources first, in the order a kubelet would trip over them.
func podDependencies(spec *corev1.PodSpec) []dependency {
	var deps []dependency
	for i := range spec.Volumes {
		deps = append(deps, volumeDependencies(&spec.Volumes[i])...)
	}
	for i := range spec.InitContainers {
		deps = append(deps, containerDependencies(&spec.InitContainers[i])...)
	}
	for i := range spec.Containers {
		deps = append(deps, containerDependencies(&spec.Containers[i])...)
	}
	return deps
}

func volumeDependencies(v *corev1.Volume) []dependency {
	var deps []dependency
	if s := v.Secret; s != nil && !isOptional(s.Optional) {
		deps = append(deps, withItems(kindSecret, s.SecretName, v.Name, s.Items)...)
	}
	if c := v.ConfigMap; c != nil && !isOptional(c.Optional) {
		deps = append(deps, withItems(kindConfigMap, c.Name, v.Name, c.Items)...)
	}
	if v.Projected == nil {
		return deps
	}
	for _, src := range v.Projected.Sources {
		if s := src.Secret; s != nil && !isOptional(s.Optional) {
			deps = append(deps, withItems(kindSecret, s.Name, v.Name, s.Items)...)
		}
		if c := src.ConfigMap; c != nil && !isOptional(c.Optional) {
			deps = append(deps, withItems(kindConfigMap, c.Name, v.Name, c.Items)...)
		}
	}
	return deps
}

// withItems needs the object itself and, when items are listed, each key:
// a kubelet refuses to mount a projection of a key that does not exist.
func withItems(kind, name, volume string, items []corev1.KeyToPath) []dependency {
	deps := []dependency{{kind: kind, name: name, volume: volume}}
	for _, it := range items {
		deps = append(deps, dependency{kind: kind, name: name, key: it.Key, volume: volume})
	}
	return deps
}

func containerDependencies(c *corev1.Container) []dependency {
	var deps []dependency
	for _, from := range c.EnvFrom {
		if r := from.SecretRef; r != nil && !isOptional(r.Optional) {
			deps = append(deps, dependency{kind: kindSecret, name: r.Name})
		}
		if r := from.ConfigMapRef; r != nil && !isOptional(r.Optional) {
			deps = append(deps, dependency{kind: kindConfigMap, name: r.Name})
		}
	}
	for _, env := range c.Env {
		if env.ValueFrom == nil {
			continue
		}
		if r := env.ValueFrom.SecretKeyRef; r != nil && !isOptional(r.Optional) {
			deps = append(deps, dependency{kind: kindSecret, name: r.Name, key: r.Key})
		}
		if r := env.ValueFrom.ConfigMapKeyRef; r != nil && !isOptional(r.Optional) {
			deps = append(deps, dependency{kind: kindConfigMap, name: r.Name, key: r.Key})
		}
	}
	return deps
}

func isOptional(p *bool) bool {
	return p != nil && *p
}

// firstMissing returns the waiting reason and message for the first
// dependency that is not satisfied, or ok=false when all are.
func firstMissing(namespace string, deps []dependency, lookup lookupFunc) (reason, message string, ok bool) {
	for _, d := range deps {
		problem := checkDependency(namespace, d, lookup)
		if problem == "" {
			continue
		}
		if d.volume != "" {
			return ReasonContainerCreating,
				fmt.Sprintf("MountVolume.SetUp failed for volume %q: %s", d.volume, problem), true
		}
		return ReasonConfigError, problem, true
	}
	return "", "", false
}

// checkDependency describes what is missing, or returns "".
func checkDependency(namespace string, d dependency, lookup lookupFunc) string {
	keys, found := lookup(d.kind, namespace, d.name)
	if !found {
		return fmt.Sprintf("%s %q not found", kindNoun(d.kind), d.name)
	}
	if d.key != "" && !keys.Has(d.key) {
		return fmt.Sprintf("couldn't find key %s in %s %s/%s", d.key, d.kind, namespace, d.name)
	}
	return ""
}

func kindNoun(kind string) string {
	if kind == kindConfigMap {
		return "configmap"
	}
	return "secret"
}
