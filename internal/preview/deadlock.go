package preview

import (
	"context"
	"fmt"
	"slices"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The deadlock this controller exists for: a chart's pods need a Secret or
// ConfigMap that a post hook makes, and Helm's order waits for the pods
// before the post hooks run, until the timeout. A plan can see it coming:
// a pod template names an object that neither the manifest nor the cluster
// has, and post hooks run only after the wait. What a hook creates is not
// known before it runs, so the warning says what is known.

// Lookup tells whether the object apiVersion, kind, namespace/name exists
// in the cluster (namespace empty for a cluster-scoped one). Nil: the
// preview does not look (the controller's own plans).
type Lookup func(ctx context.Context, apiVersion, kind, namespace, name string) (bool, error)

// podRef is a Secret or ConfigMap a pod template needs to start.
type podRef struct {
	kind, name string
	// workload is Kind/name of the object whose pods need it.
	workload string
}

// waitWarnings are the warnings of an action that waits for readiness
// before its post hooks (wait), rendering rel into namespace.
func waitWarnings(ctx context.Context, lookup Lookup, rel *releasev1.Release, wait string, post releasev1.HookEvent, namespace string) ([]string, error) {
	postHooks := hooksOf(rel.Hooks, post)
	if lookup == nil || wait != WaitBeforeHooks || len(postHooks) == 0 {
		return nil, nil
	}
	objects, err := parseManifest(rel.Manifest)
	if err != nil {
		return nil, err
	}
	made := map[string]bool{}
	var needed []podRef
	for _, o := range objects {
		made[o.id.Kind+"/"+o.id.Name] = true
		needed = append(needed, podRefs(o)...)
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range needed {
		id := r.kind + "/" + r.name
		if made[id] || seen[id] {
			continue
		}
		seen[id] = true
		exists, err := lookup(ctx, "v1", r.kind, namespace, r.name)
		if err != nil {
			return nil, fmt.Errorf("looking up %s %s/%s, which %s needs: %w", r.kind, namespace, r.name, r.workload, err)
		}
		if !exists {
			out = append(out, deadlockWarning(r, postHooks, post))
		}
	}
	slices.Sort(out)
	return out, nil
}

func deadlockWarning(r podRef, postHooks []Hook, post releasev1.HookEvent) string {
	for _, h := range postHooks {
		if h.Kind == r.kind && h.Name == r.name {
			return fmt.Sprintf("the pods of %s need %s %s, which is a %s hook: it is created only after the readiness wait, "+
				"so the wait cannot end; set waitStrategy: afterHooks", r.workload, r.kind, r.name, post)
		}
	}
	runs := fmt.Sprintf("%d %s hooks run", len(postHooks), post)
	if len(postHooks) == 1 {
		runs = fmt.Sprintf("1 %s hook runs", post)
	}
	return fmt.Sprintf("the pods of %s need %s %s, which neither the release's objects nor the cluster have; "+
		"%s after the readiness wait; if one of them creates %s, set waitStrategy: afterHooks",
		r.workload, r.kind, r.name, runs, r.name)
}

// podRefs are the Secrets and ConfigMaps the pods of o need to start (not
// those marked optional), for the kinds whose pods a wait watches.
func podRefs(o manifestObject) []podRef {
	var raw any
	switch o.id.Kind {
	case "Pod":
		raw = o.content["spec"]
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job":
		spec, _ := o.content["spec"].(map[string]any)
		template, _ := spec["template"].(map[string]any)
		raw = template["spec"]
	default:
		return nil
	}
	content, ok := raw.(map[string]any)
	if !ok {
		return nil
	}
	var pod corev1.PodSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, &pod); err != nil {
		return nil // not ours to judge: the dry run has already said what is wrong
	}
	workload := o.id.Kind + "/" + o.id.Name
	var refs []podRef
	add := func(kind, name string, optional *bool) {
		if name != "" && (optional == nil || !*optional) {
			refs = append(refs, podRef{kind: kind, name: name, workload: workload})
		}
	}
	for _, v := range pod.Volumes {
		if s := v.Secret; s != nil {
			add("Secret", s.SecretName, s.Optional)
		}
		if c := v.ConfigMap; c != nil {
			add("ConfigMap", c.Name, c.Optional)
		}
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		for _, from := range c.EnvFrom {
			if s := from.SecretRef; s != nil {
				add("Secret", s.Name, s.Optional)
			}
			if m := from.ConfigMapRef; m != nil {
				add("ConfigMap", m.Name, m.Optional)
			}
		}
		for _, env := range c.Env {
			if env.ValueFrom == nil {
				continue
			}
			if s := env.ValueFrom.SecretKeyRef; s != nil {
				add("Secret", s.Name, s.Optional)
			}
			if m := env.ValueFrom.ConfigMapKeyRef; m != nil {
				add("ConfigMap", m.Name, m.Optional)
			}
		}
	}
	return refs
}
