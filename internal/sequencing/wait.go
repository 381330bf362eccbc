package sequencing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"golang.org/x/sync/errgroup"
	"helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// errDeadline is returned when the action's time is up before a batch is
// ready or gone.
var errDeadline = errors.New("timed out: the action's timeout ran out")

// budget is how long a batch may wait from now: until the action's
// deadline, and at most the readiness timeout. The error says which ran
// out when it does.
func (c *Client) budget() (time.Duration, error) {
	remaining := time.Until(c.opts.Deadline)
	if remaining <= 0 {
		return 0, errDeadline
	}
	if t := c.opts.ReadinessTimeout; t > 0 && t < remaining {
		return t, fmt.Errorf("timed out: the readiness timeout of %s ran out", t)
	}
	return remaining, errDeadline
}

// await waits until batch i is ready: objects with both custom readiness
// annotations are judged by them, the others by the action's waiter
// (kstatus with healthCheckExprs, or Helm 3's legacy checks). While it
// waits, the observer hears which object it waits for.
func (c *Client) await(ctx context.Context, i int, batches []batch) error {
	b := batches[i]
	timeout, timedOut := c.budget()
	if timeout <= 0 {
		return b.fail(i, len(batches), timedOut)
	}
	c.observe(i, batches, PhaseWaiting, "", false)

	standard, custom, err := c.splitByReadiness(b.list)
	if err != nil {
		return b.fail(i, len(batches), err)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, timedOut)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	if len(standard) > 0 {
		g.Go(func() error { return c.waitStandard(gctx, standard, timeout) })
	}
	if len(custom) > 0 {
		g.Go(func() error {
			return c.waitCustom(gctx, custom, timedOut, func(detail string) { c.observe(i, batches, PhaseWaiting, detail, false) })
		})
	}
	probing, stopProbe := context.WithCancel(gctx)
	defer stopProbe()
	go c.probe(probing, i, batches, standard)
	if err := g.Wait(); err != nil {
		// The waiter may see its timeout end before the context does.
		if !errors.Is(err, timedOut) && (context.Cause(ctx) == timedOut || time.Since(began) >= timeout) {
			err = endedBy(timedOut, err)
		}
		return b.fail(i, len(batches), err)
	}
	return nil
}

// probe tells the observer, every poll interval, the first object of list
// that kstatus does not see ready yet, until ctx ends. It only informs:
// the action's waiter decides.
func (c *Client) probe(ctx context.Context, i int, batches []batch, list kube.ResourceList) {
	if len(list) == 0 {
		return
	}
	ticker := time.NewTicker(c.opts.PollInterval)
	defer ticker.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		detail := c.firstNotReady(list)
		if detail != last && ctx.Err() == nil {
			last = detail
			c.observe(i, batches, PhaseWaiting, detail, false)
		}
	}
}

// firstNotReady describes the first object of list kstatus does not see
// as current, or returns "" when it sees them all so (custom resources
// without status, objects only healthCheckExprs judge).
func (c *Client) firstNotReady(list kube.ResourceList) string {
	for _, info := range list {
		obj, err := c.get(info)
		if apierrors.IsNotFound(err) && jobttl.DeletesItself(info) {
			continue // done once gone, as the action's waiter counts it
		}
		if err != nil {
			return fmt.Sprintf("%s: %v", idOf(info), err)
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			continue
		}
		res, err := status.Compute(&unstructured.Unstructured{Object: content})
		if err != nil || res.Status == status.CurrentStatus {
			continue
		}
		if res.Message == "" {
			return fmt.Sprintf("%s: %s", idOf(info), res.Status)
		}
		return fmt.Sprintf("%s: %s", idOf(info), res.Message)
	}
	return ""
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

// waitStandard runs the action's own waiter on list, stopped with ctx. A
// waiter that does not heed ctx (Helm's legacy one follows its client's
// context only) is left to end by its timeout: the batch does not wait
// for it once ctx is done.
func (c *Client) waitStandard(ctx context.Context, list kube.ResourceList, timeout time.Duration) error {
	opts := append(append([]kube.WaitOption{}, c.opts.WaitOptions...),
		kube.WithWaitMethodContext(ctx), kube.WithWaitWithJobsMethodContext(ctx))
	waiter, err := c.innerWaiter(c.opts.Strategy, opts...)
	if err != nil {
		return err
	}
	result := make(chan error, 1)
	go func() {
		if c.opts.WaitForJobs {
			result <- waiter.WaitWithJobs(list, timeout)
			return
		}
		result <- waiter.Wait(list, timeout)
	}()
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return context.Cause(ctx) // stopped: nobody reads what was not ready
	}
	// Time is up. Helm's status waiter heeds ctx and then names what is
	// not ready; a moment is enough for it to say so.
	select {
	case err := <-result:
		if err != nil {
			return err
		}
	case <-time.After(waiterGrace):
	}
	return context.Cause(ctx)
}

// judgingWaiter is a waiter of the kind Helm asked for whose readiness
// waits leave the objects with both readiness annotations to their
// expressions (waitCustom), as a batch's wait does.
type judgingWaiter struct {
	kube.Waiter
	c *Client
}

func (w judgingWaiter) Wait(list kube.ResourceList, timeout time.Duration) error {
	return w.c.waitJudged(list, timeout, w.Waiter.Wait)
}

func (w judgingWaiter) WaitWithJobs(list kube.ResourceList, timeout time.Duration) error {
	return w.c.waitJudged(list, timeout, w.Waiter.WaitWithJobs)
}

// waitJudged waits for list within timeout: the objects with custom
// readiness by their expressions, the others with wait. A Job with
// expressions is held to both in this final wait: its failure expression
// fails it early, but Ready=True promises every Job of the revision
// completed, which an expression such as {.active} >= 1 does not say.
func (c *Client) waitJudged(list kube.ResourceList, timeout time.Duration, wait func(kube.ResourceList, time.Duration) error) error {
	standard, custom, err := c.splitByReadiness(list)
	if err != nil {
		return err
	}
	if len(custom) == 0 {
		return wait(list, timeout)
	}
	for _, o := range custom {
		if idOf(o.info).Kind == "Job" {
			standard = append(standard, o.info)
		}
	}
	timedOut := fmt.Errorf("timed out: the wait's timeout of %s ran out", timeout)
	ctx, cancel := context.WithTimeoutCause(c.opts.Context, timeout, timedOut)
	defer cancel()
	var g errgroup.Group
	if len(standard) > 0 {
		g.Go(func() error { return wait(standard, timeout) })
	}
	g.Go(func() error { return c.waitCustom(ctx, custom, timedOut, func(string) {}) })
	return g.Wait()
}

// waiterGrace is how long a batch whose time is up still listens for its
// waiter's error, which names what is not ready.
const waiterGrace = 2 * time.Second

// endedBy says that timedOut ended the wait that returned err. A wait that
// named what is not ready (kubewait.WaitError) keeps its words first,
// upstream's "timeout waiting for", and takes timedOut as a note.
func endedBy(timedOut, err error) error {
	we := kubewait.AddNote(err, timedOut.Error())
	if we == nil {
		return fmt.Errorf("%w: %w", timedOut, err)
	}
	we.Ending = kubewait.TimedOut
	we.Err = fmt.Errorf("%w: %w", timedOut, we.Err)
	return we
}

// notReady is the object of info in a WaitError, with its status and
// message.
func notReady(info *resource.Info, status, message string) kubewait.NotReady {
	id := idOf(info)
	return kubewait.NotReady{Kind: id.Kind, Namespace: id.Namespace, Name: id.Name, Status: status, Message: message}
}

// waitCustom polls the objects until every one is ready, one has failed,
// or ctx ends; the error names what decided, or what is not ready (after
// timedOut when ctx ran out of time). waiting hears what is not ready.
func (c *Client) waitCustom(ctx context.Context, objects []judged, timedOut error, waiting func(string)) error {
	ticker := time.NewTicker(c.opts.PollInterval)
	defer ticker.Stop()
	pending := objects
	for {
		var still []judged
		var reasons []string
		var unready []kubewait.NotReady
		for _, o := range pending {
			verdict, why, err := c.judge(o)
			if apierrors.IsNotFound(err) && jobttl.DeletesItself(o.info) {
				verdict, why, err = c.judgeGone(ctx, o)
				if err != nil {
					return err
				}
			}
			switch {
			case err != nil:
				still = append(still, o)
				reasons = append(reasons, fmt.Sprintf("%s: %v", idOf(o.info), err))
				unready = append(unready, notReady(o.info, status.UnknownStatus.String(), err.Error()))
			case verdict == VerdictFailed:
				return &kubewait.WaitError{Ending: kubewait.Stalled, Objects: []kubewait.NotReady{
					notReady(o.info, status.FailedStatus.String(), fmt.Sprintf("its failure condition %q is true", why))}}
			case verdict != VerdictReady:
				still = append(still, o)
				reasons = append(reasons, fmt.Sprintf("%s: no success condition is true yet", idOf(o.info)))
				unready = append(unready, notReady(o.info, status.InProgressStatus.String(), "no success condition is true yet"))
			}
		}
		if len(still) == 0 {
			return nil
		}
		pending = still
		waiting(reasons[0])
		select {
		case <-ctx.Done():
			return &kubewait.WaitError{Ending: kubewait.TimedOut, Objects: unready, Notes: []string{timedOut.Error()}, Err: timedOut}
		case <-ticker.C:
		}
	}
}

// judge reads the object and evaluates its readiness expressions.
func (c *Client) judge(o judged) (Verdict, string, error) {
	obj, err := c.get(o.info)
	if err != nil {
		return VerdictPending, "", err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return VerdictPending, "", err
	}
	if jobttl.DeletesItself(o.info) {
		// What a poll saw counts too, should the watch have missed it.
		jobttl.TrackerOf(c.Interface).Saw(&unstructured.Unstructured{Object: content})
	}
	verdict, expr := o.readiness.Evaluate(content)
	return verdict, expr, nil
}

// trackerPatience bounds how long a gone Job's last changes are waited
// for from the tracker that watched it since its apply.
const trackerPatience = 10 * time.Second

// judgeGone evaluates the readiness expressions of a self-deleting Job
// that is gone on the last state the kube client's tracker saw of it
// (jobttl.Tracker): a poll every PollInterval misses most Jobs that fail
// and delete themselves at once. A Job nothing here saw finish fails the
// batch: it may have failed, and a later batch must not run after a
// failed one. So does a Job that finished with no condition true, since
// its state will not change any more.
func (c *Client) judgeGone(ctx context.Context, o judged) (Verdict, string, error) {
	ctx, cancel := context.WithTimeout(ctx, trackerPatience)
	defer cancel()
	last, outcome := jobttl.TrackerOf(c.Interface).Last(ctx, o.info.Namespace, o.info.Name)
	if outcome != jobttl.Complete && outcome != jobttl.Failed {
		return VerdictPending, "", goneFailure(o.info, "it deleted itself (spec.ttlSecondsAfterFinished) before the controller saw it finish: "+
			"whether it succeeded is unknown, so the batch fails")
	}
	verdict, expr := o.readiness.Evaluate(last.Object)
	if verdict == VerdictPending {
		return verdict, "", goneFailure(o.info, fmt.Sprintf("it finished (%s) and deleted itself with no success or failure condition true on its last state", outcome))
	}
	return verdict, expr, nil
}

// goneFailure is the failure of a batch on a gone Job, worded as every
// failed wait is (kubewait.WaitError).
func goneFailure(info *resource.Info, why string) error {
	return &kubewait.WaitError{Ending: kubewait.Stalled, Objects: []kubewait.NotReady{notReady(info, status.FailedStatus.String(), why)}}
}

// get reads the object's current state.
func (c *Client) get(info *resource.Info) (runtime.Object, error) {
	if c.opts.Get != nil {
		return c.opts.Get(info)
	}
	return getFromServer(info)
}

func getFromServer(info *resource.Info) (runtime.Object, error) {
	if info.Client == nil || info.Mapping == nil {
		return nil, fmt.Errorf("%s: no client to read it with", idOf(info))
	}
	return resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
}

// awaitDeletion waits until list is gone from the cluster, within the
// batch's budget (see budget).
func (c *Client) awaitDeletion(ctx context.Context, list kube.ResourceList) error {
	timeout, timedOut := c.budget()
	if timeout <= 0 {
		return timedOut
	}
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, timedOut)
	defer cancel()
	opts := append(append([]kube.WaitOption{}, c.opts.WaitOptions...), kube.WithWaitForDeleteMethodContext(ctx))
	waiter, err := c.innerWaiter(c.opts.Strategy, opts...)
	if err != nil {
		return err
	}
	if err := waiter.WaitForDelete(list, timeout); err != nil {
		if context.Cause(ctx) == timedOut {
			return timedOut
		}
		return err
	}
	return nil
}

// holders names each object of list that is still there and what holds
// it: its finalizers, a deletion under way, or no deletion at all.
func (c *Client) holders(list kube.ResourceList) []string {
	var out []string
	for _, info := range list {
		obj, err := c.get(info)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			out = append(out, fmt.Sprintf("%s: cannot be read: %v", idOf(info), err))
			continue
		}
		out = append(out, idOf(info).String()+": "+heldBy(obj))
	}
	return out
}

// heldBy says why obj, which should be gone, is still there.
func heldBy(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "still there"
	}
	switch {
	case m.GetDeletionTimestamp() == nil:
		return "still there, not marked for deletion"
	case len(m.GetFinalizers()) > 0:
		return "held by finalizer(s) " + strings.Join(m.GetFinalizers(), ", ")
	default:
		return "deletion under way"
	}
}

// deletionWaiter is the waiter Helm's actions get (see
// GetWaiterWithOptions). Its wait for the deletion of objects an ordered
// deletion deleted ends by the action's deadline: the batches have used
// their time already, and waiting the whole timeout again would make an
// uninstall with a stuck object take twice its timeout. What is left is
// named with what holds it.
type deletionWaiter struct {
	kube.Waiter
	c *Client
}

func (w deletionWaiter) WaitForDelete(list kube.ResourceList, timeout time.Duration) error {
	ours, others := w.c.splitDeleted(list)
	var errs []error
	if len(others) > 0 {
		errs = append(errs, w.Waiter.WaitForDelete(others, timeout))
	}
	if len(ours) > 0 {
		errs = append(errs, w.c.finalDeletionCheck(ours, timeout))
	}
	return errors.Join(errs...)
}

// splitDeleted separates the objects an ordered deletion deleted from the
// others (hooks).
func (c *Client) splitDeleted(list kube.ResourceList) (ours, others kube.ResourceList) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, info := range list {
		if c.deleted[idOf(info)] {
			ours = append(ours, info)
		} else {
			others = append(others, info)
		}
	}
	return ours, others
}

// finalDeletionCheck waits, until the deadline and at most timeout, for
// the objects of list no batch gave up on, then fails naming every
// object of list still there.
func (c *Client) finalDeletionCheck(list kube.ResourceList, timeout time.Duration) error {
	c.mu.Lock()
	var pending kube.ResourceList
	for _, info := range list {
		if !c.stuck[idOf(info)] {
			pending = append(pending, info)
		}
	}
	c.mu.Unlock()
	remaining := min(timeout, time.Until(c.opts.Deadline))
	if len(pending) > 0 && remaining > 0 {
		ctx, cancel := context.WithTimeout(c.opts.Context, remaining)
		defer cancel()
		opts := append(append([]kube.WaitOption{}, c.opts.WaitOptions...), kube.WithWaitForDeleteMethodContext(ctx))
		if waiter, err := c.innerWaiter(c.opts.Strategy, opts...); err == nil {
			_ = waiter.WaitForDelete(pending, remaining) // what is left is named below
		}
	}
	if left := c.holders(list); len(left) > 0 {
		return fmt.Errorf("not deleted within the uninstall timeout: %s", strings.Join(left, "; "))
	}
	return nil
}
