package hookcleanup

import (
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/afterhooks/helm-controller/internal/runstate"
)

// OriginAnnotation names, on a hook object, the release whose hook created
// it: "<storage namespace>/<release name>".
const OriginAnnotation = "helm.toolkit.fluxcd.io/hook-release"

// Origin is the value of OriginAnnotation for a release: the namespace of
// its records and its name are what make a Helm release one and the same.
// A release of the same name whose records live in another namespace is
// another release.
func Origin(storageNamespace, release string) string {
	return storageNamespace + "/" + release
}

// neverDeleted are the kinds no cleanup deletes, whoever created them: a
// Namespace takes everything in it along, a PersistentVolumeClaim or
// PersistentVolume holds data, and a CustomResourceDefinition takes every
// custom resource of its kind along (Helm never deletes CRD hooks either).
var neverDeleted = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:             true,
	{Kind: "PersistentVolumeClaim"}: true,
	{Kind: "PersistentVolume"}:      true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: true,
}

// NeverDeleted tells whether objects of gk are out of any cleanup's reach.
func NeverDeleted(gk schema.GroupKind) bool { return neverDeleted[gk] }

// IsHook tells whether obj is annotated as a Helm hook.
func IsHook(obj metav1.Object) bool {
	_, ok := obj.GetAnnotations()[releasev1.HookAnnotation]
	return ok
}

// Stamp sets OriginAnnotation on obj to origin.
func Stamp(obj metav1.Object, origin string) {
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[OriginAnnotation] = origin
	obj.SetAnnotations(annotations)
}

// Judge decides whether the cleanup of the release origin, which may
// delete objects of kinds, may delete live, an object of kind gk found
// under the name of one of the release's recorded hooks, as read from the
// cluster with its status (recorded: that hook's manifest, may be nil). It
// returns "" when it may, else why not, in words for an event.
func Judge(gk schema.GroupKind, live *unstructured.Unstructured, recorded metav1.Object, origin string, kinds Kinds) string {
	switch {
	case NeverDeleted(gk):
		return fmt.Sprintf("a %s is never deleted", gk.Kind)
	case !IsHook(live):
		return "not a hook object"
	case keep(live) || (recorded != nil && keep(recorded)):
		return kube.ResourcePolicyAnno + ": " + kube.KeepPolicy
	}
	switch mark, ok := live.GetAnnotations()[OriginAnnotation]; {
	case !ok:
		return "no " + OriginAnnotation + " mark to prove this release's hooks created it"
	case mark != origin:
		return "created by the hooks of release " + mark
	case !kinds.Allows(gk):
		return leftReason(gk)
	}
	// A hook Job that outlived its timeout, or a post-delete hook the
	// uninstall stopped waiting for, may still run: deleting it would stop
	// its work halfway. Upstream never deletes it.
	if state := runstate.Unfinished(gk, live.Object); state != "" {
		return state + ": deleting it would stop it halfway; left to finish"
	}
	return ""
}

// keep tells whether obj carries helm.sh/resource-policy: keep, spelled as
// Helm accepts it.
func keep(obj metav1.Object) bool {
	return strings.ToLower(strings.TrimSpace(obj.GetAnnotations()[kube.ResourcePolicyAnno])) == kube.KeepPolicy
}

// PendingDescription is the description of a release uninstalled by Helm
// whose hook cleanup has not finished: the records are kept until it has.
const PendingDescription = "Uninstallation complete; deleting the objects its hooks left"

// CompletedDescription is Helm's description of an uninstalled release,
// which a kept history ends with once the cleanup is over.
const CompletedDescription = "Uninstallation complete"

// Pending tells whether rel is the newest record of a release whose
// uninstall finished but whose hook cleanup did not.
func Pending(rel *releasev1.Release) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status == common.StatusUninstalled &&
		rel.Info.Description == PendingDescription
}
