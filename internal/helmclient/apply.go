package helmclient

import (
	helmkube "helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/hookcleanup"
)

// Create creates resources as Helm's client does, without the annotations
// the API server would refuse (see StripUnappliable), with HookOrigin's
// mark on the hook objects it creates, and after deleting the finished run
// an earlier execution of a hook Job or Pod left (see rerun.go).
func (c *Client) Create(resources helmkube.ResourceList, opts ...helmkube.ClientCreateOption) (*helmkube.Result, error) {
	stripUnappliable(resources)
	if err := c.deleteFinishedRuns(resources); err != nil {
		return nil, err
	}
	if c.HookOrigin != "" {
		for _, info := range resources {
			c.stampHook(info)
		}
	}
	res, err := c.Client.Create(resources, opts...)
	c.track(resources)
	return res, err
}

// stampHook marks info, when it is a hook object a cleanup may ever
// delete, as created by HookOrigin's hooks. Helm creates hook objects
// through Create only, with server-side apply by default, which changes an
// object that exists already in place instead of failing: such an object
// was created by someone else (another release's hook of the same name, a
// hook of this release from before the option was enabled) and is not
// claimed. An object that carries this release's mark already is its own
// hook object run again. An object that cannot be read is not claimed
// either: no mark leaves it alone, which is always safe. A create racing
// this read is not seen; it would have to happen within the instant
// between the read and Helm's write.
func (c *Client) stampHook(info *resource.Info) {
	if info == nil || info.Object == nil || info.Mapping == nil || info.Client == nil {
		return
	}
	obj, err := meta.Accessor(info.Object)
	if err != nil || !hookcleanup.IsHook(obj) || hookcleanup.NeverDeleted(info.Mapping.GroupVersionKind.GroupKind()) {
		return
	}
	live, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return
	default:
		liveMeta, err := meta.Accessor(live)
		if err != nil || liveMeta.GetAnnotations()[hookcleanup.OriginAnnotation] != c.HookOrigin {
			return
		}
	}
	hookcleanup.Stamp(obj, c.HookOrigin)
}

// Update applies target as Helm's client does, without the annotations the
// API server would refuse, on either side: a client-side three-way merge
// compares the two.
func (c *Client) Update(original, target helmkube.ResourceList, opts ...helmkube.ClientUpdateOption) (*helmkube.Result, error) {
	stripUnappliable(original)
	stripUnappliable(target)
	res, err := c.Client.Update(original, target, opts...)
	c.track(target)
	return res, err
}

// track has the client's Job tracker follow every self-deleting Job of
// list from the state its apply returned; Helm refreshes each applied
// object with the API server's answer, resourceVersion included, so no
// later change is missed. Objects that were not applied (the apply failed
// first) carry no resourceVersion and are not tracked.
func (c *Client) track(list helmkube.ResourceList) {
	for _, info := range list {
		c.Jobs.Track(info)
	}
}

func stripUnappliable(list helmkube.ResourceList) {
	for _, info := range list {
		stripInfo(info)
	}
}

func stripInfo(info *resource.Info) {
	if info != nil && info.Object != nil {
		StripUnappliable(info.Object)
	}
}
