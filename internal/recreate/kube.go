package recreate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/runtime/patch"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// Options configures the client Wrap returns.
type Options struct {
	Policy Policy
	// Context bounds every recreate: the action's context, which a
	// shutdown cancels. Nil means context.Background().
	Context context.Context
	// Deadline is when the action's timeout ends; every recreate (its
	// wait for the deletion above all) ends by then. Zero means
	// defaultTimeout from the start of each recreate.
	Deadline time.Time
	// Dependents finds what a refused object owns; nil refuses every
	// recreate, since nothing could show it safe.
	Dependents Dependents
	// Observer hears each recreated object; may be nil.
	Observer func(Recreated)
	// Prepare, when set, edits a copy of a manifest object before the dry
	// run of its creation, as the inner client edits what it applies.
	Prepare func(runtime.Object)
}

// defaultTimeout bounds a recreate when Options.Deadline is unset: Helm's
// own default action timeout.
const defaultTimeout = 5 * time.Minute

// Client is a kube client whose Update recreates the objects it may
// recreate when the inner client's update refuses them.
type Client struct {
	kube.Interface
	opts Options
}

var _ kube.InterfaceWaitOptions = (*Client)(nil)

// Wrap returns inner with recreating updates.
func Wrap(inner kube.Interface, opts Options) *Client {
	return &Client{Interface: inner, opts: opts}
}

// JobTracker hands on the inner client's tracker of self-deleting Jobs.
func (c *Client) JobTracker() *jobttl.Tracker { return jobttl.TrackerOf(c.Interface) }

// GetWaiterWithOptions passes the wait options on to the inner client.
func (c *Client) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	return kubewait.Waiter(c.Interface, ws, opts...)
}

// Update updates as the inner client does. When objects were refused for
// immutable fields, those the policy allows are recreated (and what
// target drops is then deleted, which the inner client skips after a
// failure); the others fail with an ImmutableError naming the object,
// the fields and what stopped the recreate.
func (c *Client) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	res, err := c.Interface.Update(original, target, opts...)
	if err == nil {
		return res, nil
	}
	var failed []error
	for _, part := range splitJoined(err) {
		info := refused(target, part)
		if info == nil {
			failed = append(failed, part)
			continue
		}
		if ierr := c.recreate(original, info, part, opts); ierr != nil {
			failed = append(failed, ierr)
		}
	}
	if len(failed) > 0 {
		return res, joined(failed)
	}
	return c.removeDropped(res, original, target, opts)
}

// removeDropped deletes what original has and target does not, the last
// step of an update the inner client skipped because of the refusals.
func (c *Client) removeDropped(res *kube.Result, original, target kube.ResourceList, opts []kube.ClientUpdateOption) (*kube.Result, error) {
	dropped := original.Difference(target)
	if len(dropped) == 0 {
		return res, nil
	}
	// An update to nothing deletes its originals as the inner client
	// would have, honouring helm.sh/resource-policy: keep.
	removed, err := c.Interface.Update(dropped, kube.ResourceList{}, opts...)
	if removed != nil && res != nil {
		res.Deleted = append(res.Deleted, removed.Deleted...)
	}
	return res, err
}

// context returns the context of one recreate: the action's, ending at
// the action's deadline.
func (c *Client) context() (context.Context, context.CancelFunc) {
	ctx := c.opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	deadline := c.opts.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(defaultTimeout)
	}
	return context.WithDeadline(ctx, deadline)
}

// recreate recreates info, refused by cause, if the policy allows it. The
// inner client creates it again: it creates what does not exist, as it
// applies it.
func (c *Client) recreate(original kube.ResourceList, info *resource.Info, cause error, opts []kube.ClientUpdateOption) error {
	ctx, cancel := c.context()
	defer cancel()
	desired, err := patch.ToUnstructured(info.Object)
	if err != nil {
		return &ImmutableError{Object: describe(info), Fields: Fields(cause), Advice: "not recreated: reading its manifest: " + err.Error(), Err: cause}
	}
	refused := Refused{Object: describe(info), Kind: info.Mapping.GroupVersionKind.GroupKind(), Desired: desired,
		Cause: cause, Cluster: &restObject{info: info, prepare: c.opts.Prepare}, Dependents: c.opts.Dependents}
	if replaced(cause) {
		refused.InPlace = func(context.Context) error {
			_, err := c.Interface.Update(originalOf(original, info), kube.ResourceList{info}, append(opts, kube.ClientUpdateOptionForceReplace(false))...)
			return err
		}
	}
	done, err := c.opts.Policy.Recreate(ctx, refused, func(context.Context) error {
		_, err := c.Interface.Update(kube.ResourceList{}, kube.ResourceList{info}, opts...)
		return err
	})
	if err != nil {
		return err
	}
	if c.opts.Observer != nil && !done.InPlace {
		c.opts.Observer(done)
	}
	return nil
}

// replaceFailed is how Helm's client words a refused replace (a PUT, its
// force with client-side apply).
const replaceFailed = "failed to replace object: "

// replaced tells whether err refused a replace rather than a patch.
func replaced(err error) bool {
	return strings.Contains(err.Error(), replaceFailed)
}

// originalOf returns the object of original that info updates, the base
// of a client-side patch; empty when the previous revision did not have
// it (Helm then patches from the object in the cluster).
func originalOf(original kube.ResourceList, info *resource.Info) kube.ResourceList {
	if o := original.Get(info); o != nil {
		return kube.ResourceList{o}
	}
	return kube.ResourceList{}
}

// joinedErrors lists the errors of several objects on one line, as
// Helm's client does, so a condition message stays readable.
type joinedErrors []error

func (j joinedErrors) Error() string {
	msgs := make([]string, len(j))
	for i, err := range j {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, " && ")
}

func (j joinedErrors) Unwrap() []error { return j }

func joined(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return joinedErrors(errs)
}

// splitJoined returns the errors Helm's client joined, one per object.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// refused returns the object of target that err refused for an immutable
// field, found by the kind and name the API server's answer names; nil
// when err is no such refusal or names no single object of target.
func refused(target kube.ResourceList, err error) *resource.Info {
	if !IsImmutable(err) {
		return nil
	}
	var found []*resource.Info
	for _, info := range target {
		if info.Mapping != nil && names(err, info) {
			found = append(found, info)
		}
	}
	if len(found) > 1 {
		// Same kind and name in several namespaces: Helm's message names
		// namespace/name.
		found = slices.DeleteFunc(found, func(info *resource.Info) bool {
			return !strings.Contains(err.Error(), info.Namespace+"/"+info.Name)
		})
	}
	if len(found) != 1 {
		return nil
	}
	return found[0]
}

// names tells whether err is about info: by the kind and name the API
// server's answer details (Invalid answers give the kind, Conflict and
// admission policy answers the resource), else, for an admission webhook
// that gave no details, by how Helm's client names the object it failed
// to apply (server-side: "namespace/name group/version, Kind=..."; client
// side: "\"name\" with kind Kind").
func names(err error, info *resource.Info) bool {
	gvk, res := info.Mapping.GroupVersionKind, info.Mapping.Resource.Resource
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Name != "" {
		d := status.Status().Details
		return info.Name == d.Name && gvk.Group == d.Group && (strings.EqualFold(gvk.Kind, d.Kind) || d.Kind == res)
	}
	msg := err.Error()
	return strings.Contains(msg, fmt.Sprintf("%s/%s %s", info.Namespace, info.Name, gvk.String())) ||
		strings.Contains(msg, fmt.Sprintf("%q with kind %s", info.Name, gvk.Kind))
}

// describe names info as Kind/namespace/name.
func describe(info *resource.Info) string {
	kind := info.Mapping.GroupVersionKind.Kind
	if info.Namespace == "" {
		return kind + "/" + info.Name
	}
	return fmt.Sprintf("%s/%s/%s", kind, info.Namespace, info.Name)
}

// restObject is an object of a Helm manifest, reached through the REST
// client Helm built it with, with requests that end with their context
// (Helm's resource.Helper cannot take one).
type restObject struct {
	info    *resource.Info
	prepare func(runtime.Object)
}

func (o *restObject) namespaced() bool {
	return o.info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace
}

func (o *restObject) Live(ctx context.Context) (*unstructured.Unstructured, error) {
	obj, err := o.info.Client.Get().NamespaceIfScoped(o.info.Namespace, o.namespaced()).
		Resource(o.info.Mapping.Resource.Resource).Name(o.info.Name).Do(ctx).Get()
	if err != nil {
		return nil, err
	}
	return patch.ToUnstructured(obj)
}

func (o *restObject) DryRunCreate(ctx context.Context) error {
	obj := o.info.Object.DeepCopyObject()
	if o.prepare != nil {
		o.prepare(obj)
	}
	// Unknown fields are not what is asked here; Helm validates them.
	opts := &metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationIgnore}
	return o.info.Client.Post().NamespaceIfScoped(o.info.Namespace, o.namespaced()).
		Resource(o.info.Mapping.Resource.Resource).VersionedParams(opts, metav1.ParameterCodec).
		Body(obj).Do(ctx).Error()
}

func (o *restObject) Delete(ctx context.Context, uid types.UID, propagation metav1.DeletionPropagation) error {
	opts := &metav1.DeleteOptions{PropagationPolicy: &propagation, Preconditions: &metav1.Preconditions{UID: &uid}}
	return o.info.Client.Delete().NamespaceIfScoped(o.info.Namespace, o.namespaced()).
		Resource(o.info.Mapping.Resource.Resource).Name(o.info.Name).Body(opts).Do(ctx).Error()
}
