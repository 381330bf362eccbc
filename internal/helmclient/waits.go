package helmclient

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// Client is Helm's kube client whose status waits (the poller and
// hookOnly strategies) list and watch only the objects they wait for.
//
// Helm's status waiter starts informers per kind and namespace for every
// wait, so one release's wait lists and decodes every object of those kinds
// in its namespace, the release records of all its neighbours included when
// a chart ships a Secret. Its cost grows with the namespace, not with the
// release. Here each wait gets Helm's own waiter, unchanged (kstatus,
// custom status readers, Job and Pod readers, messages), over a dynamic
// client that narrows those informers to the waited-for objects by name.
type Client struct {
	*helmkube.Client
	// HookOrigin, when set, is the release (hookcleanup.Origin) whose
	// hooks Create marks as their creator; see stampHooks.
	HookOrigin string
	// Jobs tracks the self-deleting Jobs Create and Update apply, from
	// their apply on (see jobs.go).
	Jobs *jobttl.Tracker
}

// JobTracker returns the tracker of the Jobs this client applies; wrappers
// of the client find it through jobttl.TrackerOf.
func (c *Client) JobTracker() *jobttl.Tracker { return c.Jobs }

var _ helmkube.InterfaceWaitOptions = (*Client)(nil)

// KubernetesClientSet returns the clientset of the client's factory.
func (c *Client) KubernetesClientSet() (*kubernetes.Clientset, error) {
	return c.Factory.KubernetesClientSet()
}

// GetWaiter returns the waiter for strategy ws.
func (c *Client) GetWaiter(ws helmkube.WaitStrategy) (helmkube.Waiter, error) {
	return c.GetWaiterWithOptions(ws)
}

// GetWaiterWithOptions returns Helm's waiter for ws; status waits are
// narrowed to the objects each call waits for. The legacy strategy polls
// each object by name already and is returned as Helm builds it.
func (c *Client) GetWaiterWithOptions(ws helmkube.WaitStrategy, opts ...helmkube.WaitOption) (helmkube.Waiter, error) {
	switch ws {
	case helmkube.StatusWatcherStrategy, helmkube.HookOnlyStrategy:
		return &narrowWaiter{client: c.Client, jobs: c.Jobs, strategy: ws, opts: opts}, nil
	default:
		return c.Client.GetWaiterWithOptions(ws, opts...)
	}
}

// narrowWaiter builds, for every wait, Helm's waiter over a dynamic client
// narrowed to that wait's objects.
type narrowWaiter struct {
	client *helmkube.Client
	// jobs knows how the self-deleting Jobs this client applied ended.
	jobs     *jobttl.Tracker
	strategy helmkube.WaitStrategy
	opts     []helmkube.WaitOption
}

// The waits for readiness (Wait, WaitWithJobs, and WatchUntilReady for
// hooks) count a Job that deletes itself once finished as done when it is
// gone, unless they saw it fail (jobs.go); the wait for deletion sees
// every object as it is.
const (
	readiness = true
	deletion  = false
)

// The waits for readiness return Helm's error reworded on one line that
// starts with upstream's words (kubewait.WaitError): Helm records it as
// it is in the release's description, and the controller in its
// conditions and events.
func (w *narrowWaiter) Wait(resources helmkube.ResourceList, timeout time.Duration) error {
	return w.failedWait(w.narrowed(resources, timeout, readiness, helmkube.Waiter.Wait), resources)
}

func (w *narrowWaiter) WaitWithJobs(resources helmkube.ResourceList, timeout time.Duration) error {
	return w.failedWait(w.narrowed(resources, timeout, readiness, helmkube.Waiter.WaitWithJobs), resources)
}

// failedWait rewords err of a readiness wait over resources; the names of
// the objects are only built for a wait that failed.
func (w *narrowWaiter) failedWait(err error, resources helmkube.ResourceList) error {
	if err == nil {
		return nil
	}
	return w.namedGone(kubewait.FromHelmFor(err, kubewait.Named(resources)), resources)
}

// goneLookupTimeout bounds the reads namedGone makes after a wait that
// already ran out of time.
const goneLookupTimeout = 5 * time.Second

// namedGone gives the status NotFound to each object a timed-out wait
// never read that is not in the cluster. Helm's watch reports nothing of
// an object it cannot find, so the wait cannot tell a gone object from one
// it had no time to read; upstream reads every object and says NotFound of
// a gone one. Only a failed wait pays for these reads.
func (w *narrowWaiter) namedGone(err error, resources helmkube.ResourceList) error {
	we, ok := err.(*kubewait.WaitError)
	if !ok || we.Ending != kubewait.TimedOut || !slices.ContainsFunc(we.Objects, isUndetermined) {
		return err
	}
	dyn, dynErr := w.client.Factory.DynamicClient()
	if dynErr != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), goneLookupTimeout)
	defer cancel()
	named := *we
	named.Objects = slices.Clone(we.Objects)
	for i, o := range named.Objects {
		if !o.Undetermined {
			continue
		}
		if info := infoOf(resources, o); info != nil && isGone(ctx, dyn, info) {
			named.Objects[i].Undetermined = false
			named.Objects[i].Status = "NotFound"
		}
	}
	return &named
}

func isUndetermined(o kubewait.NotReady) bool { return o.Undetermined }

// infoOf returns the entry of resources o names, nil when none does.
func infoOf(resources helmkube.ResourceList, o kubewait.NotReady) *resource.Info {
	for _, info := range resources {
		if info.Mapping != nil && info.Name == o.Name && info.Namespace == o.Namespace &&
			info.Mapping.GroupVersionKind.Kind == o.Kind {
			return info
		}
	}
	return nil
}

// isGone tells whether the API server answers that info's object does not
// exist; any other answer, an error included, leaves the question open.
func isGone(ctx context.Context, dyn dynamic.Interface, info *resource.Info) bool {
	var target dynamic.ResourceInterface = dyn.Resource(info.Mapping.Resource)
	if info.Namespace != "" {
		target = dyn.Resource(info.Mapping.Resource).Namespace(info.Namespace)
	}
	_, err := target.Get(ctx, info.Name, metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

func (w *narrowWaiter) WaitForDelete(resources helmkube.ResourceList, timeout time.Duration) error {
	return w.narrowed(resources, timeout, deletion, helmkube.Waiter.WaitForDelete)
}

func (w *narrowWaiter) WatchUntilReady(resources helmkube.ResourceList, timeout time.Duration) error {
	return w.namedGone(kubewait.FromHelm(w.narrowed(resources, timeout, readiness, helmkube.Waiter.WatchUntilReady)), resources)
}

// narrowed runs wait, one of Helm's waiter methods, on the waiter whose
// informers see only resources, with stand-ins for gone self-deleting
// Jobs when standIns is set.
func (w *narrowWaiter) narrowed(resources helmkube.ResourceList, timeout time.Duration, standIns bool,
	wait func(helmkube.Waiter, helmkube.ResourceList, time.Duration) error) error {
	objects := objectsOf(resources, standIns, w.jobs)
	inner, err := w.over(objects)
	if err != nil {
		return err
	}
	return objects.jobs.explain(wait(inner, resources, timeout))
}

// over returns Helm's waiter whose informers see only objects.
func (w *narrowWaiter) over(objects *namedObjects) (helmkube.Waiter, error) {
	narrowed := &helmkube.Client{
		Factory:   &narrowFactory{Factory: w.client.Factory, objects: objects},
		Namespace: w.client.Namespace,
		//nolint:staticcheck // carried over so a caller's wait context still applies.
		WaitContext: w.client.WaitContext,
	}
	narrowed.SetLogger(w.client.Logger().Handler())
	return narrowed.GetWaiterWithOptions(w.strategy, w.opts...)
}

// narrowFactory is a Helm kube factory whose dynamic client lists and
// watches only objects.
type narrowFactory struct {
	helmkube.Factory
	objects *namedObjects
}

func (f *narrowFactory) DynamicClient() (dynamic.Interface, error) {
	inner, err := f.Factory.DynamicClient()
	if err != nil {
		return nil, err
	}
	return &narrowDynamic{Interface: inner, objects: f.objects}, nil
}
