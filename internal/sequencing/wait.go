package sequencing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
)

// errDeadline is returned when the action's time is up before a batch is
// ready or gone.
var errDeadline = errors.New("timed out: the action's timeout ran out")

// await waits until batch i is ready: objects with both custom readiness
// annotations are judged by them, the others by the action's waiter
// (kstatus with healthCheckExprs, or Helm 3's legacy checks).
func (c *Client) await(i int, batches []batch) error {
	b := batches[i]
	if !b.Wait {
		return nil
	}
	remaining := time.Until(c.opts.Deadline)
	if remaining <= 0 {
		return b.fail(i, len(batches), errDeadline)
	}
	c.observe(i, batches, PhaseWaiting)

	standard, custom, err := c.splitByReadiness(b.list)
	if err != nil {
		return b.fail(i, len(batches), err)
	}
	ctx, cancel := context.WithTimeout(c.opts.Context, remaining)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	if len(standard) > 0 {
		g.Go(func() error { return c.waitStandard(gctx, standard, remaining) })
	}
	if len(custom) > 0 {
		g.Go(func() error { return c.waitCustom(gctx, custom) })
	}
	if err := g.Wait(); err != nil {
		return b.fail(i, len(batches), err)
	}
	c.observe(i, batches, PhaseReady)
	return nil
}

// judged is an object with custom readiness.
type judged struct {
	info      *resource.Info
	readiness *Readiness
}

// splitByReadiness separates objects with custom readiness from the rest.
// An object with only one of the two annotations keeps the default, with
// a warning, as HIP-0025 says; a broken expression fails the batch.
func (c *Client) splitByReadiness(list kube.ResourceList) (kube.ResourceList, []judged, error) {
	var standard kube.ResourceList
	var custom []judged
	for _, info := range list {
		var annotations map[string]string
		if m, err := meta.Accessor(info.Object); err == nil {
			annotations = m.GetAnnotations()
		}
		r, warning, err := ParseReadiness(annotations)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", idOf(info), err)
		}
		if warning != "" {
			c.warn([]string{fmt.Sprintf("%s: %s", idOf(info), warning)})
		}
		if r == nil {
			standard = append(standard, info)
			continue
		}
		custom = append(custom, judged{info: info, readiness: r})
	}
	return standard, custom, nil
}

// waitStandard runs the action's own waiter on list, stopped with ctx.
func (c *Client) waitStandard(ctx context.Context, list kube.ResourceList, timeout time.Duration) error {
	opts := append(append([]kube.WaitOption{}, c.opts.WaitOptions...),
		kube.WithWaitMethodContext(ctx), kube.WithWaitWithJobsMethodContext(ctx))
	waiter, err := c.GetWaiterWithOptions(c.opts.Strategy, opts...)
	if err != nil {
		return err
	}
	if c.opts.WaitForJobs {
		return waiter.WaitWithJobs(list, timeout)
	}
	return waiter.Wait(list, timeout)
}

// waitCustom polls the objects until every one is ready, one has failed,
// or ctx ends; the error names what decided, or what is not ready.
func (c *Client) waitCustom(ctx context.Context, objects []judged) error {
	ticker := time.NewTicker(c.opts.PollInterval)
	defer ticker.Stop()
	pending := objects
	for {
		var still []judged
		var reasons []string
		for _, o := range pending {
			verdict, why, err := c.judge(o)
			switch {
			case err != nil:
				still = append(still, o)
				reasons = append(reasons, fmt.Sprintf("%s: %v", idOf(o.info), err))
			case verdict == VerdictFailed:
				return fmt.Errorf("%s failed: its failure condition %q is true", idOf(o.info), why)
			case verdict != VerdictReady:
				still = append(still, o)
				reasons = append(reasons, fmt.Sprintf("%s: no success condition is true yet", idOf(o.info)))
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; not ready: %s", errDeadline, strings.Join(reasons, "; "))
		case <-ticker.C:
		}
	}
}

// judge reads the object and evaluates its readiness expressions.
func (c *Client) judge(o judged) (Verdict, string, error) {
	get := c.opts.Get
	if get == nil {
		get = getFromServer
	}
	obj, err := get(o.info)
	if err != nil {
		return VerdictPending, "", err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return VerdictPending, "", err
	}
	verdict, expr := o.readiness.Evaluate(content)
	return verdict, expr, nil
}

func getFromServer(info *resource.Info) (runtime.Object, error) {
	return resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
}

// awaitDeletion waits until list is gone from the cluster.
func (c *Client) awaitDeletion(list kube.ResourceList) error {
	remaining := time.Until(c.opts.Deadline)
	if remaining <= 0 {
		return errDeadline
	}
	ctx, cancel := context.WithTimeout(c.opts.Context, remaining)
	defer cancel()
	opts := append(append([]kube.WaitOption{}, c.opts.WaitOptions...), kube.WithWaitForDeleteMethodContext(ctx))
	waiter, err := c.GetWaiterWithOptions(c.opts.Strategy, opts...)
	if err != nil {
		return err
	}
	return waiter.WaitForDelete(list, remaining)
}
