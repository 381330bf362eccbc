package helmclient

import (
	"context"
	"fmt"
	"time"

	helmkube "helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/hookcleanup"
	"github.com/afterhooks/helm-controller/internal/kubewait"
	"github.com/afterhooks/helm-controller/internal/runstate"
)

// A hook Job or Pod that an earlier run of the same hook left behind (its
// delete policy keeps it: hook-failed, hook-succeeded, or a TTL not yet
// expired) is still there when the hook runs again. Helm 4 creates hooks
// with server-side apply, which changes that object in place instead of
// failing as Helm 3's create did; the object stays finished, and Helm's
// wait reads the old run's outcome as the new one's: a hook that never ran
// is recorded as succeeded (or failed), and the release is Ready without
// it. So the old run is deleted first and the hook really runs, as Helm
// does itself for hooks with before-hook-creation, its default policy.
//
// Only a finished run of the same hook is deleted: a Job or Pod still
// running is left alone (deleting it would stop the work halfway; the wait
// then follows it), and an object that is not the same hook (no hook
// annotation, other hook events, or marked as another release's by the
// hook cleanup) is not this hook's to delete. One that says
// helm.sh/resource-policy: keep is deleted by nothing: it is reused as
// Helm reuses it, as upstream does.

// finishedRunTimeout bounds the wait for an old run's deletion; a run
// still there after it makes the hook's create go on as Helm would.
const finishedRunTimeout = time.Minute

// deleteFinishedRuns deletes, for each hook Job or Pod of resources, the
// finished run an earlier execution of the same hook left, and waits until
// it is gone.
func (c *Client) deleteFinishedRuns(resources []*resource.Info) error {
	for _, info := range resources {
		if err := c.deleteFinishedRun(info); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) deleteFinishedRun(info *resource.Info) error {
	if info == nil || info.Object == nil || info.Mapping == nil || info.Client == nil {
		return nil
	}
	gk := info.Mapping.GroupVersionKind.GroupKind()
	if gk != runstate.JobKind && gk != runstate.PodKind {
		return nil
	}
	manifest, err := meta.Accessor(info.Object)
	if err != nil || !hookcleanup.IsHook(manifest) {
		return nil
	}
	helper := resource.NewHelper(info.Client, info.Mapping)
	live, err := helper.Get(info.Namespace, info.Name)
	if err != nil {
		// Not there (the usual case), or unreadable: Helm's create
		// decides.
		return nil
	}
	old, ok := c.finishedRunOf(manifest, gk, live)
	if !ok {
		return nil
	}
	c.Logger().Info("deleting the finished run an earlier execution of the hook left, so that the hook runs again",
		"kind", gk.Kind, "namespace", info.Namespace, "name", info.Name, "uid", old.GetUID())
	background := metav1.DeletePropagationBackground
	uid := old.GetUID()
	_, err = helper.DeleteWithOptions(info.Namespace, info.Name, &metav1.DeleteOptions{
		PropagationPolicy: &background,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting the finished run of hook %s %s/%s left by an earlier execution: %w",
			gk.Kind, info.Namespace, info.Name, err)
	}
	return waitGone(helper, info.Namespace, info.Name, uid)
}

// finishedRunOf returns live as a finished earlier run of the hook
// manifest describes, or false when it is not one.
func (c *Client) finishedRunOf(manifest metav1.Object, gk schema.GroupKind, live runtime.Object) (metav1.Object, bool) {
	old, err := meta.Accessor(live)
	if err != nil || old.GetDeletionTimestamp() != nil {
		return nil, false
	}
	events := old.GetAnnotations()[releasev1.HookAnnotation]
	if events == "" || events != manifest.GetAnnotations()[releasev1.HookAnnotation] {
		return nil, false
	}
	if origin, marked := old.GetAnnotations()[hookcleanup.OriginAnnotation]; marked && origin != c.HookOrigin {
		return nil, false
	}
	if keeps(old) || keeps(manifest) {
		return nil, false
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil || runstate.Unfinished(gk, content) != "" {
		return nil, false
	}
	return old, true
}

// waitGone waits until the object name with uid is gone: an object of the
// same name with another uid is someone else's new one.
func waitGone(helper *resource.Helper, namespace, name string, uid types.UID) error {
	ctx, cancel := context.WithTimeout(context.Background(), finishedRunTimeout)
	defer cancel()
	live := func(context.Context) (metav1.Object, error) {
		obj, err := helper.Get(namespace, name)
		if err != nil {
			return nil, err
		}
		return meta.Accessor(obj)
	}
	if err := kubewait.UntilGone(ctx, 250*time.Millisecond, uid, live); err != nil {
		return fmt.Errorf("waiting for the finished run of hook %s/%s to be deleted: %w", namespace, name, err)
	}
	return nil
}

// keeps tells whether obj says helm.sh/resource-policy: keep.
func keeps(obj metav1.Object) bool {
	return obj.GetAnnotations()[helmkube.ResourcePolicyAnno] == helmkube.KeepPolicy
}
