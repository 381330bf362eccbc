package sequencing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/kubewait"
)

// Phase is where a batch is.
type Phase string

const (
	PhaseApplying Phase = "applying"
	PhaseWaiting  Phase = "waiting"
	PhaseReady    Phase = "ready"
	// PhaseApplied: applied, and not waited for: nothing needs it.
	PhaseApplied Phase = "applied"
	// PhaseFailed: its apply or its readiness failed; Detail says why.
	PhaseFailed   Phase = "failed"
	PhaseDeleting Phase = "deleting"
	// PhaseDeleted: its objects are gone, or their deletion is under way
	// and nothing waits for it.
	PhaseDeleted Phase = "deleted"
	// PhaseStuck: its deletion failed or did not finish in time; Detail
	// names the objects that hold it. The batches before it are deleted
	// all the same.
	PhaseStuck Phase = "stuck"
)

// Progress is what Options.Observer hears about each batch.
type Progress struct {
	// Index counts from 1 up to Total: the batch's position in the plan.
	Index, Total int
	Batch        string
	Phase        Phase
	// Resources lists the batch's objects, for "waiting for" messages.
	Resources []string
	// Detail says, while waiting, which object is not ready yet and why,
	// and for a failed or stuck batch what failed or holds it.
	Detail string
	// Removal marks the deletion of what an upgrade or rollback drops:
	// Index and Total count the batches of the revision it replaces.
	Removal bool
}

// Planned is what Options.Planned hears before an ordered apply or an
// ordered uninstall starts.
type Planned struct {
	Plan *Plan
	// Deleting is true for an uninstall: the batches go last first.
	Deleting bool
}

// Options configure a Client for one Helm action.
type Options struct {
	// Charts are the subchart facts of the chart being applied (ChartsOf),
	// or those recorded with the revision being rolled back to or
	// uninstalled (Recorded).
	Charts Charts
	// Strategy and WaitOptions make the waiter batches are waited with;
	// WaitForJobs waits for Jobs to complete, as the action would.
	Strategy    kube.WaitStrategy
	WaitOptions []kube.WaitOption
	WaitForJobs bool
	// Deadline bounds the whole sequenced action: every batch waits at
	// most until then.
	Deadline time.Time
	// ReadinessTimeout bounds the wait of each batch, for readiness or
	// for deletion, within the Deadline; zero leaves only the Deadline.
	ReadinessTimeout time.Duration
	// Context stops waits early when it is done.
	Context context.Context
	// PollInterval is how often custom readiness is checked, and how
	// often a waiting batch is looked at to name what it waits for;
	// default 2s.
	PollInterval time.Duration
	// Planned hears the plan of each ordered apply or uninstall; it may
	// be nil.
	Planned func(Planned)
	// Observer hears each batch start, wait and end; it may be nil.
	// Calls do not overlap.
	Observer func(Progress)
	// Warn receives each misconfiguration warning once; it may be nil.
	Warn func(string)
	// Get reads an object's current state for custom readiness, for what
	// a batch waits for and for what holds a deletion; the default reads
	// it from the API server.
	Get func(*resource.Info) (runtime.Object, error)
}

// Client is a Helm kube client that applies a release's resources in
// batches (see NewPlan), waiting for each batch something needs before
// applying what needs it, and deletes them in reverse. Helm's actions call
// it once to apply or delete everything; hooks pass through untouched, as
// HIP-0025 leaves them to hook weights.
//
// It knows which chart each object comes from by reading the manifests
// Helm builds: only a release manifest has "# Source:" comments, so an
// object never seen in one (a hook) is not sequenced.
type Client struct {
	kube.Interface
	opts Options

	mu sync.Mutex
	// known are the objects of the release manifests seen, with their
	// chart and annotations as the manifest has them: the objects Helm
	// hands over may have lost annotations the API server refuses (see
	// helmclient.StripUnappliable) by the time a deletion needs them.
	known    map[ObjectID]Resource
	warned   map[string]bool
	rootName string
	// deleted are the objects an ordered deletion asked the API server to
	// delete, and stuck those of them a batch gave up waiting for: the
	// uninstall's own wait for deletion (see GetWaiterWithOptions) ends
	// by the action's deadline for them and names what holds them.
	deleted map[ObjectID]bool
	stuck   map[ObjectID]bool

	observeMu sync.Mutex
}

var _ kube.InterfaceWaitOptions = (*Client)(nil)

// Wrap returns a Client over inner.
func Wrap(inner kube.Interface, opts Options) *Client {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 2 * time.Second
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	return &Client{Interface: inner, opts: opts, known: map[ObjectID]Resource{}, warned: map[string]bool{},
		deleted: map[ObjectID]bool{}, stuck: map[ObjectID]bool{}}
}

// JobTracker hands on the inner client's tracker of self-deleting Jobs.
func (c *Client) JobTracker() *jobttl.Tracker { return jobttl.TrackerOf(c.Interface) }

// Learn reads a release manifest for the charts of its objects. Uninstall
// builds its objects from the manifest without the source comments, so it
// must be taught the release's manifest first.
func (c *Client) Learn(manifest string) error {
	resources, err := ParseManifest(manifest)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range resources {
		c.known[r.ID] = r
		if c.rootName == "" {
			c.rootName, _, _ = strings.Cut(r.Chart, "/")
		}
	}
	return nil
}

// Build builds as the inner client does, learning the charts of the
// objects of a release manifest on the way.
func (c *Client) Build(reader io.Reader, validate bool) (kube.ResourceList, error) {
	data, err := io.ReadAll(reader)
	if err != nil {
		return nil, err
	}
	list, err := c.Interface.Build(bytes.NewReader(data), validate)
	if err != nil {
		return list, err
	}
	if bytes.Contains(data, []byte(sourcePrefix)) {
		// Inner Build accepted it, so a parse failure here only means
		// less is known: those objects are applied unsequenced.
		_ = c.Learn(string(data))
	}
	return list, nil
}

// Create creates resources batch by batch.
func (c *Client) Create(resources kube.ResourceList, opts ...kube.ClientCreateOption) (*kube.Result, error) {
	batches, err := c.plan(resources)
	if err != nil || batches == nil {
		if err != nil {
			return &kube.Result{}, err
		}
		return c.Interface.Create(resources, opts...)
	}
	return c.applyInOrder(batches, func(b batch) (*kube.Result, error) {
		return c.Interface.Create(b.list, opts...)
	})
}

// Update applies target batch by batch, then deletes what original has
// and target does not, in the reverse of original's order.
func (c *Client) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	batches, err := c.plan(target)
	if err != nil {
		return &kube.Result{}, err
	}
	if batches == nil {
		return c.Interface.Update(original, target, opts...)
	}
	total, err := c.applyInOrder(batches, func(b batch) (*kube.Result, error) {
		return c.Interface.Update(original.Intersect(b.list), b.list, opts...)
	})
	if err != nil {
		return total, err
	}
	removed := original.Difference(target)
	if len(removed) == 0 {
		return total, nil
	}
	// An Update to nothing deletes the originals the way Helm's Update
	// does: objects with helm.sh/resource-policy: keep and objects gone
	// already are skipped, and only what it deleted is waited for.
	outcome := c.inReverse(original, removed, true, func(list kube.ResourceList) (*kube.Result, error) {
		return c.Interface.Update(list, nil, opts...)
	})
	merge(total, outcome.result)
	// A removal the API server refuses fails the upgrade, as it fails
	// Helm's; one that is only slow is reported, and Helm does not wait
	// for it either.
	return total, errors.Join(outcome.failed...)
}

// Delete deletes resources in the reverse of their order: a batch once the
// batches that need it are gone. A batch whose deletion fails or does not
// finish in time holds up the batches it needs only until then: they are
// deleted all the same, and what held it is reported (a refused deletion
// here, a slow one by the uninstall's wait for deletion).
func (c *Client) Delete(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	outcome := c.inReverse(resources, resources, false, func(list kube.ResourceList) (*kube.Result, error) {
		return c.deleteEach(list, policy)
	})
	return outcome.result, outcome.failed
}

// deleteEach deletes list as the inner client does. That client tells
// nothing of what it deleted when anything failed, so then each object is
// deleted on its own to learn which.
func (c *Client) deleteEach(list kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, error) {
	res, errs := c.Interface.Delete(list, policy)
	if len(errs) == 0 {
		return res, nil
	}
	out := &kube.Result{}
	var failed []error
	for _, info := range list {
		one, errs := c.Interface.Delete(kube.ResourceList{info}, policy)
		if len(errs) > 0 {
			failed = append(failed, fmt.Errorf("%s: %w", idOf(info), errors.Join(errs...)))
			continue
		}
		merge(out, one)
	}
	return out, errors.Join(failed...)
}

// applyInOrder applies batches as the plan's graph allows: each once the
// batches it comes after are done, batches that do not need each other at
// the same time. The first failure stops what has not started and ends
// the waits under way; it is returned once every started batch is back.
func (c *Client) applyInOrder(batches []batch, apply func(batch) (*kube.Result, error)) (*kube.Result, error) {
	ctx, cancel := context.WithCancelCause(c.opts.Context)
	defer cancel(nil)
	total := &kube.Result{}
	var mu sync.Mutex
	var first error
	done := make([]chan struct{}, len(batches))
	for i := range done {
		done[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for i := range batches {
		wg.Go(func() {
			if !waitFor(ctx, done, batches[i].Predecessors()) {
				return
			}
			res, err := c.applyBatch(ctx, i, batches, apply)
			mu.Lock()
			defer mu.Unlock()
			merge(total, res)
			if err == nil {
				close(done[i])
				return
			}
			if first == nil {
				first = err
				cancel(errStopped)
			}
		})
	}
	wg.Wait()
	if first != nil {
		return total, first
	}
	for i := range batches {
		select {
		case <-done[i]:
		default:
			return total, batches[i].fail(i, len(batches), fmt.Errorf("not applied: %w", context.Cause(ctx)))
		}
	}
	return total, nil
}

// errStopped ends the batches under way when another batch failed.
var errStopped = errors.New("stopped: another resource group failed")

// waitFor waits until every batch of ids is done; false when ctx ends
// first.
func waitFor(ctx context.Context, done []chan struct{}, ids []int) bool {
	for _, id := range ids {
		select {
		case <-done[id]:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// applyBatch applies batch i and, when something needs it, waits until it
// is ready.
func (c *Client) applyBatch(ctx context.Context, i int, batches []batch, apply func(batch) (*kube.Result, error)) (*kube.Result, error) {
	b := batches[i]
	if len(b.list) == 0 {
		return nil, nil // Helm's client refuses an empty list
	}
	c.observe(i, batches, PhaseApplying, "", false)
	res, err := apply(b)
	if err != nil {
		err = b.fail(i, len(batches), err)
		c.observe(i, batches, PhaseFailed, err.Error(), false)
		return res, err
	}
	if !b.Wait {
		c.observe(i, batches, PhaseApplied, "", false)
		return res, nil
	}
	if err := c.await(ctx, i, batches); err != nil {
		c.observe(i, batches, PhaseFailed, err.Error(), false)
		return res, err
	}
	c.observe(i, batches, PhaseReady, "", false)
	return res, nil
}

// deletion is what an ordered deletion did.
type deletion struct {
	result *kube.Result
	// failed are the deletions the API server refused, per batch, and
	// the batches the action's context stopped.
	failed []error
}

// inReverse runs del on the objects of gone in the reverse of release's
// plan: a batch once every batch that comes after it is done with, and
// waited for until gone when a batch before it waits for that. The order
// is release's: gone may be a part of it (what an upgrade removes), whose
// own plan would miss the groups it needs. Without a known object, gone
// goes in one call, as the inner client would do it.
//
// A batch whose deletion fails or does not end in time is reported and
// given up on; the batches before it are deleted all the same, so that an
// object held by a finalizer does not leave the rest of the release
// behind. Once the action's deadline has passed, the remaining batches are
// deleted without waiting. Only the end of the action's context stops it.
func (c *Client) inReverse(release, gone kube.ResourceList, removal bool, del func(kube.ResourceList) (*kube.Result, error)) deletion {
	batches, _, err := c.planWarning(release, false)
	if err != nil {
		return deletion{result: &kube.Result{}, failed: []error{err}}
	}
	if batches == nil {
		res, err := del(gone)
		out := deletion{result: res}
		if out.result == nil {
			out.result = &kube.Result{}
		}
		if err != nil {
			out.failed = append(out.failed, err)
		}
		return out
	}
	for i := range batches {
		batches[i].list = batches[i].list.Intersect(gone)
	}
	if !removal && c.opts.Planned != nil {
		c.opts.Planned(Planned{Plan: planOf(batches, nil), Deleting: true})
	}
	out := deletion{result: &kube.Result{}}
	var mu sync.Mutex
	finished := make([]chan struct{}, len(batches))
	for i := range finished {
		finished[i] = make(chan struct{})
	}
	successors := successorsOf(batches)
	var wg sync.WaitGroup
	for i := range batches {
		wg.Go(func() {
			defer close(finished[i])
			var res *kube.Result
			var err error
			if waitFor(c.opts.Context, finished, successors[i]) {
				res, err = c.deleteBatch(i, batches, removal, del)
			} else {
				err = batches[i].fail(i, len(batches), fmt.Errorf("not deleted: %w", context.Cause(c.opts.Context)))
			}
			mu.Lock()
			defer mu.Unlock()
			merge(out.result, res)
			if err != nil {
				out.failed = append(out.failed, err)
			}
		})
	}
	wg.Wait()
	return out
}

// deleteBatch deletes batch i and, when a batch before it waits for that,
// waits until what it deleted is gone. It returns the API server's
// refusals; a batch that is only slow to go is reported as stuck.
func (c *Client) deleteBatch(i int, batches []batch, removal bool, del func(kube.ResourceList) (*kube.Result, error)) (*kube.Result, error) {
	b := batches[i]
	if len(b.list) == 0 {
		return nil, nil
	}
	c.observe(i, batches, PhaseDeleting, "", removal)
	res, err := del(b.list)
	var deleted kube.ResourceList
	if res != nil {
		deleted = res.Deleted
	}
	c.remember(deleted, c.deleted)
	if err != nil {
		err = b.fail(i, len(batches), err)
		c.observe(i, batches, PhaseStuck, err.Error(), removal)
		return res, err
	}
	if len(deleted) == 0 || len(b.Predecessors()) == 0 {
		c.observe(i, batches, PhaseDeleted, "", removal)
		return res, nil
	}
	if waitErr := c.awaitDeletion(c.opts.Context, deleted); waitErr != nil {
		c.remember(deleted, c.stuck)
		detail := fmt.Sprintf("%v; %s", waitErr, strings.Join(c.holders(deleted), "; "))
		c.observe(i, batches, PhaseStuck, detail, removal)
		return res, nil
	}
	c.observe(i, batches, PhaseDeleted, "", removal)
	return res, nil
}

// successorsOf returns, for each batch, the batches that come after it.
func successorsOf(batches []batch) [][]int {
	out := make([][]int, len(batches))
	for i, b := range batches {
		for _, prev := range b.Predecessors() {
			out[prev] = append(out[prev], i)
		}
	}
	return out
}

// remember adds the objects of list to set.
func (c *Client) remember(list kube.ResourceList, set map[ObjectID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, info := range list {
		set[idOf(info)] = true
	}
}

// GetWaiterWithOptions returns the inner client's waiter, for Helm's (or
// afterHooks') final wait: objects with both readiness annotations are
// judged by their expressions there too, as HIP-0025 says they replace
// kstatus; its wait for deletion ends by the action's deadline for the
// objects an ordered deletion deleted, and names what holds each one left.
func (c *Client) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	w, err := c.innerWaiter(ws, opts...)
	if err != nil {
		return nil, err
	}
	if ws == kube.HookOnlyStrategy {
		// spec.uninstall.disableWait: the batches were deleted in order
		// (the order is what the user opted in to), but nothing left
		// behind fails the action afterwards, as nothing does upstream.
		return w, nil
	}
	return deletionWaiter{Waiter: judgingWaiter{Waiter: w, c: c}, c: c}, nil
}

func (c *Client) innerWaiter(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	return kubewait.Waiter(c.Interface, ws, opts...)
}

// batch is a plan's batch with the Helm objects it holds.
type batch struct {
	Batch
	list kube.ResourceList
}

// fail names the batch in err. A failed wait (kubewait.WaitError) keeps
// its words first, as upstream words a failed wait, and takes the batch as
// a note.
func (b batch) fail(i, total int, err error) error {
	group := fmt.Sprintf("resource group %s (%d/%d)", b.Name, i+1, total)
	if we := kubewait.AddNote(err, group); we != nil {
		return we
	}
	return fmt.Errorf("%s: %w", group, err)
}

// plan orders list, or returns nil batches when no object of it came from
// a release manifest (hooks, or an action that never built one). The plan
// is told to Options.Planned, its warnings to Options.Warn.
func (c *Client) plan(list kube.ResourceList) ([]batch, error) {
	batches, warnings, err := c.planWarning(list, true)
	if err == nil && batches != nil && c.opts.Planned != nil {
		c.opts.Planned(Planned{Plan: planOf(batches, warnings)})
	}
	return batches, err
}

// planWarning orders list and returns the plan's warnings, also told to
// Options.Warn when warn is set: a release being deleted had its
// misconfigurations reported when it was applied.
func (c *Client) planWarning(list kube.ResourceList, warn bool) ([]batch, []string, error) {
	c.mu.Lock()
	resources, infos, known := c.resourcesOf(list)
	c.mu.Unlock()
	if !known {
		return nil, nil, nil
	}
	plan, err := NewPlan(resources, c.opts.Charts)
	if err != nil {
		return nil, nil, err
	}
	if warn {
		c.warn(plan.Warnings)
	}
	out := make([]batch, 0, len(plan.Batches))
	for _, b := range plan.Batches {
		nb := batch{Batch: b}
		for _, id := range b.Resources {
			nb.list = append(nb.list, infos[id])
		}
		out = append(out, nb)
	}
	return out, plan.Warnings, nil
}

// resourcesOf describes list's objects for NewPlan. Called with mu held.
func (c *Client) resourcesOf(list kube.ResourceList) ([]Resource, map[ObjectID]*resource.Info, bool) {
	resources := make([]Resource, 0, len(list))
	infos := make(map[ObjectID]*resource.Info, len(list))
	anyKnown := false
	for _, info := range list {
		id := idOf(info)
		r, ok := c.known[id]
		if !ok {
			// Manifests leave namespaced objects' namespace to the release.
			unqualified := id
			unqualified.Namespace = ""
			r, ok = c.known[unqualified]
		}
		if ok {
			anyKnown = true
		} else {
			r = Resource{Chart: c.rootName}
			if m, err := meta.Accessor(info.Object); err == nil {
				r.Annotations = m.GetAnnotations()
			}
		}
		r.ID = id
		resources = append(resources, r)
		infos[id] = info
	}
	return resources, infos, anyKnown
}

func idOf(info *resource.Info) ObjectID {
	id := ObjectID{Namespace: info.Namespace, Name: info.Name}
	if info.Mapping != nil {
		id.Group, id.Kind = info.Mapping.GroupVersionKind.Group, info.Mapping.GroupVersionKind.Kind
	} else if info.Object != nil {
		gvk := info.Object.GetObjectKind().GroupVersionKind()
		id.Group, id.Kind = gvk.Group, gvk.Kind
	}
	return id
}

func (c *Client) warn(warnings []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range warnings {
		if c.warned[w] {
			continue
		}
		c.warned[w] = true
		if c.opts.Warn != nil {
			c.opts.Warn(w)
		}
	}
}

func (c *Client) observe(i int, batches []batch, phase Phase, detail string, removal bool) {
	if c.opts.Observer == nil {
		return
	}
	names := make([]string, 0, len(batches[i].list))
	for _, info := range batches[i].list {
		names = append(names, idOf(info).String())
	}
	c.observeMu.Lock()
	defer c.observeMu.Unlock()
	c.opts.Observer(Progress{Index: i + 1, Total: len(batches), Batch: batches[i].Name, Phase: phase,
		Resources: names, Detail: detail, Removal: removal})
}

// planOf is the plan of batches as they are (for a deletion, with only
// the objects it deletes), with warnings.
func planOf(batches []batch, warnings []string) *Plan {
	p := &Plan{Batches: make([]Batch, 0, len(batches)), Warnings: warnings}
	for _, b := range batches {
		nb := b.Batch
		nb.Resources = make([]ObjectID, 0, len(b.list))
		for _, info := range b.list {
			nb.Resources = append(nb.Resources, idOf(info))
		}
		p.Batches = append(p.Batches, nb)
	}
	return p
}

func merge(total, res *kube.Result) {
	if res == nil {
		return
	}
	total.Created = append(total.Created, res.Created...)
	total.Updated = append(total.Updated, res.Updated...)
	total.Deleted = append(total.Deleted, res.Deleted...)
}
