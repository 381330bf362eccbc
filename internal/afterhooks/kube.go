package afterhooks

import (
	"slices"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// kubeClient is the kube client an afterHooks action runs with. Helm sees
// the client it was given, with two differences:
//
//   - Under Helm's hookOnly strategy (which afterHooks runs with) Helm does
//     not wait for deleted hook objects to be gone (before-hook-creation,
//     hook-succeeded, hook-failed): its hookOnly waiter returns at once.
//     A hook re-created while its previous object still terminates then
//     fails at random. Here deletions are awaited with the strategy of the
//     readiness wait, as they are under beforeHooks.
//   - The objects Helm's apply creates are recorded, so a revision whose
//     readiness wait fails can delete them (cleanupOnFail), as Helm does
//     for a revision whose own wait fails.
type kubeClient struct {
	kube.Interface
	// deletions is the strategy deletions are awaited with.
	deletions kube.WaitStrategy

	mu      sync.Mutex
	created kube.ResourceList
}

var _ kube.InterfaceWaitOptions = (*kubeClient)(nil)

func wrapKubeClient(inner kube.Interface, deletions kube.WaitStrategy) *kubeClient {
	return &kubeClient{Interface: inner, deletions: deletions}
}

// JobTracker hands on the inner client's tracker of self-deleting Jobs.
func (c *kubeClient) JobTracker() *jobttl.Tracker { return jobttl.TrackerOf(c.Interface) }

// Update applies target as the inner client does and records what it
// created.
func (c *kubeClient) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	res, err := c.Interface.Update(original, target, opts...)
	if res != nil && len(res.Created) > 0 {
		c.mu.Lock()
		c.created = append(c.created, res.Created...)
		c.mu.Unlock()
	}
	return res, err
}

// Created returns the objects the action's applies created, without
// CustomResourceDefinitions: Helm never deletes those (a deleted CRD takes
// every custom resource of its kind with it).
func (c *kubeClient) Created() kube.ResourceList {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.created), func(info *resource.Info) bool {
		return info.Mapping != nil && info.Mapping.GroupVersionKind.Kind == "CustomResourceDefinition"
	})
}

func (c *kubeClient) GetWaiter(ws kube.WaitStrategy) (kube.Waiter, error) {
	return c.GetWaiterWithOptions(ws)
}

func (c *kubeClient) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	w, err := c.innerWaiter(ws, opts...)
	if err != nil || ws != kube.HookOnlyStrategy || c.deletions == "" || c.deletions == kube.HookOnlyStrategy {
		return w, err
	}
	del, err := c.innerWaiter(c.deletions, opts...)
	if err != nil {
		return nil, err
	}
	return deletionsAwaited{Waiter: w, deletions: del}, nil
}

func (c *kubeClient) innerWaiter(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	return kubewait.Waiter(c.Interface, ws, opts...)
}

// deletionsAwaited is a hookOnly waiter that waits for deletions.
type deletionsAwaited struct {
	kube.Waiter
	deletions kube.Waiter
}

func (w deletionsAwaited) WaitForDelete(resources kube.ResourceList, timeout time.Duration) error {
	return w.deletions.WaitForDelete(resources, timeout)
}
