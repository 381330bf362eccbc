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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// spec.uninstall.deleteHookResources: hooks are not part of a Helm
// release, so Helm's uninstall deletes none of the objects they created.
// Those without a delete policy that removed them (Completed Jobs and
// their pods, ConfigMaps, ServiceAccounts) stay in the cluster. With the
// option, the uninstall deletes afterwards those that this release's hooks
// created, as internal/hookcleanup judges them.

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

// hookOrigin is the mark (hookcleanup.Origin) of the hook objects of obj's
// release.
func hookOrigin(obj *v2.HelmRelease) string {
	return hookcleanup.Origin(obj.GetStorageNamespace(), v2.ReleaseName(obj))
}

// hookCleanup deletes the objects left by the hooks of one release.
type hookCleanup struct {
	cfg     *helmaction.Configuration
	release string
	// origin is the mark the release's hook objects carry.
	origin string
	// kinds are the kinds of hook objects it may delete.
	kinds hookcleanup.Kinds
	// hooks are those of every stored revision, read before the uninstall,
	// each manifest once.
	hooks []*releasev1.Hook
	// readErr is why the hooks or the kinds could not be read; reported
	// after the uninstall, which must not depend on the cleanup.
	readErr error
}

// hookCleanupReport is what one cleanup did.
type hookCleanupReport struct {
	// deleted are the objects deleted, "Kind/namespace/name".
	deleted []string
	// left are the objects found under a hook's name and not deleted,
	// each with the reason in parentheses.
	left []string
}

// newHookCleanup reads the hooks recorded for obj's release. It returns
// nil when obj does not ask for the cleanup, so that Helm's uninstall stays
// exactly as it is.
func newHookCleanup(cfg *helmaction.Configuration, obj *v2.HelmRelease) *hookCleanup {
	if !obj.GetUninstall().DeleteHookResources {
		return nil
	}
	c := &hookCleanup{cfg: cfg, release: v2.ReleaseName(obj), origin: hookOrigin(obj)}
	c.kinds, c.readErr = hookcleanup.ParseKinds(obj.GetUninstall().DeleteHookResourceKinds)
	if c.readErr != nil {
		return c
	}
	var err error
	if c.hooks, err = recordedHooks(cfg, c.release); err != nil {
		c.readErr = fmt.Errorf("reading the release's hooks: %w", err)
	}
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

// run deletes the hook objects still in the cluster that Judge lets go and
// waits for them to be gone with strategy (not at all under hookOnly), all
// before deadline: what is left of the uninstall's timeout. It goes on past
// a failed object, so one failure leaves as little behind as possible, and
// returns a *HookCleanupError naming what failed.
func (c *hookCleanup) run(deadline time.Time, strategy kube.WaitStrategy, opts []kube.WaitOption) (hookCleanupReport, error) {
	var report hookCleanupReport
	if c.readErr != nil {
		return report, &HookCleanupError{Release: c.release, Err: c.readErr}
	}
	infos, errs := c.build()
	var deleted kube.ResourceList
	var late []string
	for _, info := range infos {
		uid, reason, err := c.inspect(info)
		switch {
		case err != nil:
			errs = append(errs, err)
			continue
		case reason != "":
			report.left = append(report.left, objectName(info)+" ("+reason+")")
			continue
		case uid == "":
			continue // gone already
		case !time.Now().Before(deadline):
			late = append(late, objectName(info))
			continue
		}
		ok, err := deleteObject(info, uid)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			deleted = append(deleted, info)
		}
	}
	if len(late) > 0 {
		errs = append(errs, fmt.Errorf("no time left of the uninstall timeout to delete %s", strings.Join(late, ", ")))
	}
	if len(deleted) > 0 && strategy != kube.HookOnlyStrategy {
		if err := c.waitForDelete(deleted, strategy, opts, time.Until(deadline)); err != nil {
			errs = append(errs, err)
		}
	}
	report.deleted = objectNames(deleted)
	if len(errs) > 0 {
		return report, &HookCleanupError{Release: c.release, Err: errors.Join(errs...)}
	}
	return report, nil
}

// build turns the hook manifests into objects of the configuration's kube
// client, so that they are read and deleted on the release's cluster as
// its identity (remote cluster, impersonation). Each object comes once,
// whichever revisions recorded it.
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
			id := info.Mapping.GroupVersionKind.GroupKind().String() + "/" + info.Namespace + "/" + info.Name
			if seen[id] {
				continue
			}
			seen[id] = true
			infos = append(infos, info)
		}
	}
	return infos, errs
}

// inspect reads the live object of info and returns its UID when
// hookcleanup.Judge lets it go, Judge's reason when not, and neither when
// there is no such object.
func (c *hookCleanup) inspect(info *resource.Info) (uid types.UID, reason string, err error) {
	live, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	if apierrors.IsNotFound(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", objectName(info), err)
	}
	obj, err := asUnstructured(live)
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", objectName(info), err)
	}
	if reason := hookcleanup.Judge(info.Mapping.GroupVersionKind.GroupKind(), obj, recordedMeta(info), c.origin, c.kinds); reason != "" {
		return "", reason, nil
	}
	return obj.GetUID(), "", nil
}

// asUnstructured returns obj as unstructured content, status included:
// Judge reads whether a Job or Pod has finished from it. Helm's kube
// client reads objects unstructured already.
func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// deleteObject deletes the object of info if its UID is still uid, so that
// an object replaced since it was judged is left alone; Helm's kube client
// cannot pass that condition, so the object's own REST client (the
// configuration's) deletes it. Jobs' pods go with them: background
// propagation, as Helm deletes hooks.
func deleteObject(info *resource.Info, uid types.UID) (bool, error) {
	background := metav1.DeletePropagationBackground
	_, err := resource.NewHelper(info.Client, info.Mapping).DeleteWithOptions(info.Namespace, info.Name, &metav1.DeleteOptions{
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

// recordedMeta is the metadata of the hook's manifest, or nil.
func recordedMeta(info *resource.Info) metav1.Object {
	if info.Object == nil {
		return nil
	}
	m, err := meta.Accessor(info.Object)
	if err != nil {
		return nil
	}
	return m
}

// waitForDelete waits up to timeout for deleted to be gone with the
// uninstall's waiter.
func (c *hookCleanup) waitForDelete(deleted kube.ResourceList, strategy kube.WaitStrategy, opts []kube.WaitOption, timeout time.Duration) error {
	names := strings.Join(objectNames(deleted), ", ")
	if timeout <= 0 {
		return fmt.Errorf("no time left of the uninstall timeout to wait for the deletion of %s", names)
	}
	waiter, err := kubewait.Waiter(c.cfg.KubeClient, strategy, opts...)
	if err == nil {
		err = waiter.WaitForDelete(deleted, timeout)
	}
	if err != nil {
		return fmt.Errorf("waiting for the deletion of %s: %w", names, err)
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

// HookLeftovers is what an uninstall of obj's release would do, now, with
// the objects its hooks left (spec.uninstall.deleteHookResources): the
// objects it would delete and those it would leave, each with the reason
// in parentheses. It reads and judges them as the cleanup does (build,
// inspect), deleting nothing. Nothing when obj does not ask for the
// cleanup. Hooks the uninstall itself runs may leave more.
func HookLeftovers(cfg *helmaction.Configuration, obj *v2.HelmRelease) (deleted, left []string, err error) {
	c := newHookCleanup(cfg, obj)
	if c == nil {
		return nil, nil, nil
	}
	if c.readErr != nil {
		return nil, nil, c.readErr
	}
	infos, errs := c.build()
	for _, info := range infos {
		uid, reason, err := c.inspect(info)
		switch {
		case err != nil:
			errs = append(errs, err)
		case reason != "":
			left = append(left, objectName(info)+" ("+reason+")")
		case uid != "":
			deleted = append(deleted, objectName(info))
		}
	}
	return deleted, left, errors.Join(errs...)
}
