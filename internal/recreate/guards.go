package recreate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations and values of Helm's that the guards read.
const (
	resourcePolicy       = "helm.sh/resource-policy"
	keepPolicy           = "keep"
	releaseNameAnno      = "meta.helm.sh/release-name"
	releaseNamespaceAnno = "meta.helm.sh/release-namespace"
)

// localFinalizers are finalizers the API server's own garbage collector
// removes: a deletion that carries them ends without any other party.
var localFinalizers = map[string]bool{
	metav1.FinalizerOrphanDependents: true,
	metav1.FinalizerDeleteDependents: true,
}

// guard checks live, the object in the cluster that r refers to, against
// the rules no consent lifts, and returns why it must not be deleted, or
// "" when nothing stops it. err is set when what it owns could not be
// found out; then it must not be deleted either.
func (p Policy) guard(ctx context.Context, r Refused, live *unstructured.Unstructured) (string, error) {
	for _, check := range []func(Refused, *unstructured.Unstructured) string{
		keptByPolicy, optedOutInCluster, p.otherRelease, externalFinalizers, statefulSetSelector, unfinishedJob,
	} {
		if why := check(r, live); why != "" {
			return why, nil
		}
	}
	return dependentsLost(ctx, r, live)
}

// keptByPolicy: Helm never deletes an object marked
// helm.sh/resource-policy: keep, in its manifest or in the cluster.
func keptByPolicy(r Refused, live *unstructured.Unstructured) string {
	switch {
	case isKeep(r.Desired.GetAnnotations()):
		return fmt.Sprintf("its manifest says %s: %s", resourcePolicy, keepPolicy)
	case isKeep(live.GetAnnotations()):
		return fmt.Sprintf("the object in the cluster says %s: %s", resourcePolicy, keepPolicy)
	}
	return ""
}

// isKeep reads the resource policy as Helm does (case and spaces aside).
func isKeep(annotations map[string]string) bool {
	return strings.ToLower(strings.TrimSpace(annotations[resourcePolicy])) == keepPolicy
}

// optedOutInCluster: an object someone annotated
// helm.toolkit.fluxcd.io/force: disabled in the cluster opts out, whatever
// its manifest says.
func optedOutInCluster(_ Refused, live *unstructured.Unstructured) string {
	if live.GetAnnotations()[Annotation] == Disabled {
		return fmt.Sprintf("the object in the cluster says %s: %s", Annotation, Disabled)
	}
	return ""
}

// otherRelease: an object whose Helm ownership annotations name another
// release is that release's to delete.
func (p Policy) otherRelease(_ Refused, live *unstructured.Unstructured) string {
	if p.Release.Name == "" {
		return ""
	}
	a := live.GetAnnotations()
	name, ns := a[releaseNameAnno], a[releaseNamespaceAnno]
	if (name == "" || name == p.Release.Name) && (ns == "" || ns == p.Release.Namespace) {
		return ""
	}
	return fmt.Sprintf("it belongs to release %s/%s (%s, %s)", ns, name, releaseNamespaceAnno, releaseNameAnno)
}

// externalFinalizers: a finalizer other than the garbage collector's makes
// the deletion wait for whoever removes it (an operator, a cloud
// provider's load balancer cleanup), and that party may act on the
// deletion (release a volume, an address, a bucket).
func externalFinalizers(_ Refused, live *unstructured.Unstructured) string {
	var external []string
	for _, f := range live.GetFinalizers() {
		if !localFinalizers[f] {
			external = append(external, f)
		}
	}
	if len(external) == 0 {
		return ""
	}
	return fmt.Sprintf("it has the finalizer %s: its deletion would wait for the controller or external system that removes it, and may release what that system holds",
		strings.Join(external, ", "))
}

var statefulSetKind = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}

// statefulSetSelector: a StatefulSet is recreated with its pods orphaned,
// for the new one to adopt. Under a new selector it cannot adopt them: the
// old pods would keep running, unowned, and hold the names (and volumes)
// the new StatefulSet's pods need.
func statefulSetSelector(r Refused, live *unstructured.Unstructured) string {
	if r.Kind != statefulSetKind {
		return ""
	}
	want, _, _ := unstructured.NestedFieldNoCopy(r.Desired.Object, "spec", "selector")
	have, _, _ := unstructured.NestedFieldNoCopy(live.Object, "spec", "selector")
	if equality.Semantic.DeepEqual(want, have) {
		return ""
	}
	return "its selector changes, and a new StatefulSet could not adopt the pods of the old one: they would keep running unowned " +
		"and hold the names and volumes of the new pods; move the pods over by hand (delete it with --cascade=orphan, then its pods one by one)"
}

// dependentsLost: deleting an object deletes what it owns (background
// propagation) or leaves it without an owner (orphan), and what those own
// in turn. Only what the new object makes again by itself (remadeBy: a
// Job's pods, a Deployment's ReplicaSets and their pods) may go; anything
// else that depends on it stops the recreate: a PersistentVolumeClaim or
// PersistentVolume holds data, and a custom resource, a Secret or any
// object someone made owned by it would be gone for good.
func dependentsLost(ctx context.Context, r Refused, live *unstructured.Unstructured) (string, error) {
	if r.Dependents == nil {
		return "", fmt.Errorf("no way to list what it owns")
	}
	owners, err := r.Dependents.Owned(ctx, live)
	if err != nil {
		return "", fmt.Errorf("finding what it owns: %w", err)
	}
	data, others := lost(owners, r.Kind, live.GetUID())
	switch {
	case len(data) > 0:
		return fmt.Sprintf("it owns %s, whose data a recreate would delete", listed3(data)), nil
	case len(others) == 0:
		return "", nil
	case !builtIn(r.Kind):
		return fmt.Sprintf("it owns %s, which a recreate would delete with it (a custom resource's dependents may hold data)", listed3(others)), nil
	}
	return fmt.Sprintf("it owns %s, which a recreate would delete with it (%s)", listed3(others), remadeNote(r.Kind)), nil
}

// remadeBy are, for the built-in kinds whose controllers make objects
// owned by them, the kinds of those objects: a new object of the kind
// makes them again, so losing the old ones loses nothing.
var remadeBy = map[schema.GroupKind][]schema.GroupKind{
	{Group: "apps", Kind: "Deployment"}: {{Group: "apps", Kind: "ReplicaSet"}},
	{Group: "apps", Kind: "ReplicaSet"}: {podKind},
	{Group: "apps", Kind: "DaemonSet"}:  {podKind, controllerRevisionKind},
	statefulSetKind:                     {podKind, controllerRevisionKind},
	jobKind:                             {podKind},
	{Group: "batch", Kind: "CronJob"}:   {jobKind},
	{Kind: "ReplicationController"}:     {podKind},
	{Kind: "Service"}:                   {{Group: "discovery.k8s.io", Kind: "EndpointSlice"}},
}

var (
	podKind                = schema.GroupKind{Kind: "Pod"}
	controllerRevisionKind = schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}
)

// holdsData are the kinds whose loss loses data, whoever owns them.
var holdsData = map[schema.GroupKind]bool{
	{Kind: "PersistentVolumeClaim"}: true,
	{Kind: "PersistentVolume"}:      true,
}

// lost walks what the object of kind and uid owns, and what that owns in
// turn, through the objects its kind makes again, and returns the
// dependents that would be lost with it: those holding data and the
// others, sorted, each named with the object it is reached through when
// not owned directly.
func lost(owners Owners, kind schema.GroupKind, uid types.UID) (data, others []string) {
	type step struct {
		kind schema.GroupKind
		uid  types.UID
		via  string
	}
	seen := map[types.UID]bool{uid: true}
	queue := []step{{kind: kind, uid: uid}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, dep := range owners[s.uid] {
			if seen[dep.UID] {
				continue
			}
			seen[dep.UID] = true
			named := dep.String()
			if s.via != "" {
				named += " (through " + s.via + ")"
			}
			switch {
			case holdsData[dep.Kind]:
				data = append(data, named)
			case slices.Contains(remadeBy[s.kind], dep.Kind):
				queue = append(queue, step{kind: dep.Kind, uid: dep.UID, via: dep.String()})
			default:
				others = append(others, named)
			}
		}
	}
	slices.Sort(data)
	slices.Sort(others)
	return data, others
}

// listed3 names up to three objects and counts the rest.
func listed3(objects []string) string {
	const shown = 3
	list := strings.Join(objects[:min(shown, len(objects))], ", ")
	if len(objects) > shown {
		list += fmt.Sprintf(" and %d more", len(objects)-shown)
	}
	return list
}

// remadeNote says what a new object of kind makes again, and so what a
// recreate may delete.
func remadeNote(kind schema.GroupKind) string {
	remade := remadeBy[kind]
	if len(remade) == 0 {
		return "a new " + kind.Kind + " makes none of them again"
	}
	names := make([]string, len(remade))
	for i, gk := range remade {
		names[i] = gk.Kind + "s"
	}
	return "a new " + kind.Kind + " makes again only its " + strings.Join(names, " and ")
}

// builtInGroups are the API groups Kubernetes serves itself. A kind of
// any other group (or one Kubernetes does not serve in these groups) is
// treated as a custom resource.
var builtInGroups = map[string]bool{
	"": true, "apps": true, "batch": true, "autoscaling": true, "policy": true,
	"networking.k8s.io": true, "rbac.authorization.k8s.io": true, "storage.k8s.io": true,
	"scheduling.k8s.io": true, "coordination.k8s.io": true, "discovery.k8s.io": true,
	"node.k8s.io": true, "certificates.k8s.io": true, "admissionregistration.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "apiregistration.k8s.io": true, "resource.k8s.io": true,
	"events.k8s.io": true,
}

func builtIn(gk schema.GroupKind) bool {
	return builtInGroups[gk.Group]
}
