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
)

// Phase is where a batch is.
type Phase string

const (
	PhaseApplying Phase = "applying"
	PhaseWaiting  Phase = "waiting"
	PhaseReady    Phase = "ready"
	PhaseDeleting Phase = "deleting"
)

// Progress is what Options.Observer hears about each batch.
type Progress struct {
	// Index counts from 1 up to Total.
	Index, Total int
	Batch        string
	Phase        Phase
	// Resources lists the batch's objects, for "waiting for" messages.
	Resources []string
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
	// Deadline bounds the whole sequenced apply: every batch waits at
	// most until then.
	Deadline time.Time
	// Context stops waits early when it is done.
	Context context.Context
	// PollInterval is how often custom readiness is checked; default 2s.
	PollInterval time.Duration
	// Observer hears each batch start, wait and end; it may be nil.
	Observer func(Progress)
	// Warn receives each misconfiguration warning once; it may be nil.
	Warn func(string)
	// Get reads an object's current state for custom readiness; the
	// default reads it from the API server.
	Get func(*resource.Info) (runtime.Object, error)
}

// Client is a Helm kube client that applies a release's resources in
// batches (see NewPlan), waiting for each batch before the next, and
// deletes them in reverse. Helm's actions call it once to apply or delete
// everything; hooks pass through untouched, as HIP-0025 leaves them to
// hook weights.
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
	// StripUnappliable) by the time a deletion needs them.
	known    map[ObjectID]Resource
	warned   map[string]bool
	rootName string
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
	return &Client{Interface: inner, opts: opts, known: map[ObjectID]Resource{}, warned: map[string]bool{}}
}

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
	total := &kube.Result{}
	for i, b := range batches {
		if len(b.list) == 0 {
			continue // Helm's client refuses an empty list
		}
		c.observe(i, batches, PhaseApplying)
		res, err := c.Interface.Create(b.list, opts...)
		merge(total, res)
		if err != nil {
			return total, b.fail(i, len(batches), err)
		}
		if err := c.await(i, batches); err != nil {
			return total, err
		}
	}
	return total, nil
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
	total := &kube.Result{}
	for i, b := range batches {
		if len(b.list) == 0 {
			continue
		}
		c.observe(i, batches, PhaseApplying)
		res, err := c.Interface.Update(original.Intersect(b.list), b.list, opts...)
		merge(total, res)
		if err != nil {
			return total, b.fail(i, len(batches), err)
		}
		if err := c.await(i, batches); err != nil {
			return total, err
		}
	}
	removed := original.Difference(target)
	if len(removed) == 0 {
		return total, nil
	}
	err = c.inReverse(original, removed, func(list kube.ResourceList) error {
		// An Update to nothing deletes the originals the way Helm's
		// Update does, honouring helm.sh/resource-policy: keep.
		res, err := c.Interface.Update(list, nil, opts...)
		merge(total, res)
		return err
	})
	return total, err
}

// Delete deletes resources in the reverse of their order, each batch gone
// before the one before it is deleted.
func (c *Client) Delete(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	total := &kube.Result{}
	var errs []error
	err := c.inReverse(resources, resources, func(list kube.ResourceList) error {
		res, batchErrs := c.Interface.Delete(list, policy)
		merge(total, res)
		errs = append(errs, batchErrs...)
		return errors.Join(batchErrs...)
	})
	if err != nil && len(errs) == 0 {
		errs = append(errs, err)
	}
	return total, errs
}

// inReverse runs del on the objects of gone, batch by batch from the last
// batch of release to the first, waiting for each to be gone before the
// next. The order is release's: gone may be a part of it (what an upgrade
// removes), whose own plan would miss the groups it needs. Without a known
// object, gone goes in one call, as the inner client would do it.
func (c *Client) inReverse(release, gone kube.ResourceList, del func(kube.ResourceList) error) error {
	batches, err := c.planQuietly(release)
	if err != nil {
		return err
	}
	if batches == nil {
		return del(gone)
	}
	for i := range batches {
		batches[i].list = batches[i].list.Intersect(gone)
	}
	for i := len(batches) - 1; i >= 0; i-- {
		b := batches[i]
		if len(b.list) == 0 {
			continue
		}
		c.observe(i, batches, PhaseDeleting)
		if err := del(b.list); err != nil {
			return b.fail(i, len(batches), err)
		}
		if i == 0 {
			break
		}
		if err := c.awaitDeletion(b.list); err != nil {
			return b.fail(i, len(batches), err)
		}
	}
	return nil
}

func (c *Client) GetWaiterWithOptions(ws kube.WaitStrategy, opts ...kube.WaitOption) (kube.Waiter, error) {
	if wo, ok := c.Interface.(kube.InterfaceWaitOptions); ok {
		return wo.GetWaiterWithOptions(ws, opts...)
	}
	return c.Interface.GetWaiter(ws)
}

// batch is a plan's batch with the Helm objects it holds.
type batch struct {
	Batch
	list kube.ResourceList
}

func (b batch) fail(i, total int, err error) error {
	return fmt.Errorf("resource group %s (%d/%d): %w", b.Name, i+1, total, err)
}

// plan orders list, or returns nil batches when no object of it came from
// a release manifest (hooks, or an action that never built one).
func (c *Client) plan(list kube.ResourceList) ([]batch, error) {
	return c.planWarning(list, true)
}

// planQuietly is plan for a release being deleted: its misconfigurations
// were reported when it was applied.
func (c *Client) planQuietly(list kube.ResourceList) ([]batch, error) {
	return c.planWarning(list, false)
}

func (c *Client) planWarning(list kube.ResourceList, warn bool) ([]batch, error) {
	c.mu.Lock()
	resources, infos, known := c.resourcesOf(list)
	c.mu.Unlock()
	if !known {
		return nil, nil
	}
	plan, err := NewPlan(resources, c.opts.Charts)
	if err != nil {
		return nil, err
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
	return out, nil
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

func (c *Client) observe(i int, batches []batch, phase Phase) {
	if c.opts.Observer == nil {
		return
	}
	names := make([]string, 0, len(batches[i].list))
	for _, info := range batches[i].list {
		names = append(names, idOf(info).String())
	}
	c.opts.Observer(Progress{Index: i + 1, Total: len(batches), Batch: batches[i].Name, Phase: phase, Resources: names})
}

func merge(total, res *kube.Result) {
	if res == nil {
		return
	}
	total.Created = append(total.Created, res.Created...)
	total.Updated = append(total.Updated, res.Updated...)
	total.Deleted = append(total.Deleted, res.Deleted...)
}
