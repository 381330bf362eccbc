package action

import (
	"errors"
	"fmt"
	"strings"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

// spec.uninstall.deleteHookResources: hooks are not part of a Helm
// release, so Helm's uninstall deletes none of the objects they created.
// Those without a delete policy that removed them (Completed Jobs and
// their pods, ConfigMaps, ServiceAccounts) stay in the cluster. With the
// option, the uninstall deletes them afterwards.

// HookCleanupError is a failure of deleteHookResources after Helm's
// uninstall succeeded: the release itself is uninstalled, only objects its
// hooks left may remain.
type HookCleanupError struct {
	// Release is the Helm release name.
	Release string
	// Err names the objects that could not be read, deleted or waited for.
	Err error
}

func (e *HookCleanupError) Error() string {
	return fmt.Sprintf("release %s uninstalled, but deleting the objects its hooks left failed: %v", e.Release, e.Err)
}

func (e *HookCleanupError) Unwrap() error { return e.Err }

// crdGroupKind is never deleted: as in Helm's own hook deletion, deleting a
// CRD would delete every custom resource of it.
var crdGroupKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// hookCleanup deletes the objects left by the hooks of one release.
type hookCleanup struct {
	cfg     *helmaction.Configuration
	release string
	// hooks are those of every stored revision, read before the uninstall
	// (which deletes the records unless keepHistory), each manifest once.
	hooks []*releasev1.Hook
	// readErr is why the hooks could not be read; reported after the
	// uninstall, which must not depend on the cleanup.
	readErr error
}

// newHookCleanup reads the hooks recorded for the release. It returns nil
// when obj does not ask for the cleanup, so that Helm's uninstall stays
// exactly as it is.
func newHookCleanup(cfg *helmaction.Configuration, release string, enabled bool) *hookCleanup {
	if !enabled {
		return nil
	}
	c := &hookCleanup{cfg: cfg, release: release}
	c.hooks, c.readErr = recordedHooks(cfg, release)
	return c
}

// recordedHooks returns the hooks of every stored revision of the
// release, newest first, each manifest once: a hook that changed between
// revisions may have left an object under each of its names.
func recordedHooks(cfg *helmaction.Configuration, release string) ([]*releasev1.Hook, error) {
	rels, err := History(cfg, release)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var hooks []*releasev1.Hook
	for _, rel := range rels {
		for _, h := range rel.Hooks {
			if h == nil || seen[h.Manifest] {
				continue
			}
			seen[h.Manifest] = true
			hooks = append(hooks, h)
		}
	}
	return hooks, nil
}

// run deletes the hook objects still in the cluster and waits for them to
// be gone as u waits for the release's objects, within u's timeout. It
// returns the deleted objects ("Kind/namespace/name") and a
// *HookCleanupError naming those it could not handle; it goes on past a
// failed object, so one failure leaves as little behind as possible.
func (c *hookCleanup) run(u *helmaction.Uninstall) ([]string, error) {
	if c.readErr != nil {
		return nil, &HookCleanupError{Release: c.release, Err: fmt.Errorf("reading the release's hooks: %w", c.readErr)}
	}
	infos, errs := c.build()
	var deleted kube.ResourceList
	for _, info := range infos {
		ok, err := deleteHookObject(info)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			deleted = append(deleted, info)
		}
	}
	if len(deleted) > 0 {
		if err := c.waitForDelete(deleted, u.WaitStrategy, u.WaitOptions, u.Timeout); err != nil {
			errs = append(errs, err)
		}
	}
	names := objectNames(deleted)
	if len(errs) > 0 {
		return names, &HookCleanupError{Release: c.release, Err: errors.Join(errs...)}
	}
	return names, nil
}

// build turns the hook manifests into objects of the configuration's kube
// client, so that they are read and deleted on the release's cluster as
// its identity (remote cluster, impersonation). Each object comes once,
// whichever revisions recorded it; CRDs are left out.
func (c *hookCleanup) build() ([]*resource.Info, []error) {
	seen := map[string]bool{}
	var infos []*resource.Info
	var errs []error
	for _, h := range c.hooks {
		built, err := c.cfg.KubeClient.Build(strings.NewReader(h.Manifest), false)
		if meta.IsNoMatchError(err) {
			// The kind is no longer served (its CRD went with the
			// release): no object of it can be left.
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("building %s %s of hook %s: %w", h.Kind, h.Name, h.Path, err))
			continue
		}
		for _, info := range built {
			if info.Mapping == nil || info.Client == nil {
				errs = append(errs, fmt.Errorf("%s %s of hook %s: no REST client to reach it", h.Kind, info.Name, h.Path))
				continue
			}
			gk := info.Mapping.GroupVersionKind.GroupKind()
			id := gk.String() + "/" + info.Namespace + "/" + info.Name
			if seen[id] || gk == crdGroupKind {
				continue
			}
			seen[id] = true
			infos = append(infos, info)
		}
	}
	return infos, errs
}

// deleteHookObject deletes the live object of info when it is still a
// hook (it carries helm.sh/hook: an object of the same name that is not a
// hook was not made by the release's hooks) and nothing asks to keep it.
// The deletion is conditional on the UID read, so an object replaced in
// between is left alone; Helm's kube client cannot pass that condition,
// so the object's own REST client (the configuration's) deletes it. Jobs'
// pods go with them: background propagation, as Helm deletes hooks.
func deleteHookObject(info *resource.Info) (bool, error) {
	helper := resource.NewHelper(info.Client, info.Mapping)
	live, err := helper.Get(info.Namespace, info.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", objectName(info), err)
	}
	obj, err := meta.Accessor(live)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", objectName(info), err)
	}
	if _, hook := obj.GetAnnotations()[releasev1.HookAnnotation]; !hook || keep(obj.GetAnnotations()) || keepRecorded(info.Object) {
		return false, nil
	}
	uid := obj.GetUID()
	background := metav1.DeletePropagationBackground
	_, err = helper.DeleteWithOptions(info.Namespace, info.Name, &metav1.DeleteOptions{
		PropagationPolicy: &background,
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone or replaced since it was read: nothing of the hook's left.
		return false, nil
	case err != nil:
		return false, fmt.Errorf("deleting %s: %w", objectName(info), err)
	}
	return true, nil
}

// keep tells whether annotations carry helm.sh/resource-policy: keep,
// spelled as Helm accepts it.
func keep(annotations map[string]string) bool {
	return strings.ToLower(strings.TrimSpace(annotations[kube.ResourcePolicyAnno])) == kube.KeepPolicy
}

// keepRecorded is keep for the hook's manifest: the chart's word counts
// even when the live object lost the annotation.
func keepRecorded(obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	m, err := meta.Accessor(obj)
	return err == nil && keep(m.GetAnnotations())
}

// waitForDelete waits for deleted to be gone with the uninstall's waiter:
// none with disableWait (hookOnly), as for the release's own objects.
func (c *hookCleanup) waitForDelete(deleted kube.ResourceList, strategy kube.WaitStrategy, opts []kube.WaitOption, timeout time.Duration) error {
	waiter, err := waiterOf(c.cfg.KubeClient, strategy, opts)
	if err == nil {
		err = waiter.WaitForDelete(deleted, timeout)
	}
	if err != nil {
		return fmt.Errorf("waiting for the deletion of %s: %w", strings.Join(objectNames(deleted), ", "), err)
	}
	return nil
}

// objectName is "Kind/namespace/name" ("Kind/name" when cluster-scoped).
func objectName(info *resource.Info) string {
	kind := info.Mapping.GroupVersionKind.Kind
	if info.Namespace == "" {
		return kind + "/" + info.Name
	}
	return kind + "/" + info.Namespace + "/" + info.Name
}

func objectNames(infos kube.ResourceList) []string {
	names := make([]string, 0, len(infos))
	for _, info := range infos {
		names = append(names, objectName(info))
	}
	return names
}
