package storagedriver

import (
	"container/list"
	"sync"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DefaultDecodedBudget is the decoded size (bytes of record JSON) a
// Decoded cache keeps by default. A release of the podinfo chart is about
// 100 KiB of JSON, 87 of them the chart; the chart is kept once for
// every record that carries an equal one (shareChart), so records of
// charts in common cost their manifest and values each, about 10 KiB for
// podinfo: some 3,000 podinfo releases, or 260 releases of charts all
// different. Past it the releases read least recently are decoded again,
// which costs what every read cost without the cache.
const DefaultDecodedBudget = 32 << 20

// Decoded remembers decoded release records so that a reconcile that finds
// the release unchanged does not decode its record again. Each is kept
// under its Secret's UID and resourceVersion, which the API server changes
// on every write: a record written, replaced or deleted and recreated
// behind the controller's back (helm rollback by hand, kubectl edit) has a
// new resourceVersion or UID, is not found here and is decoded afresh. The
// Secrets themselves are always listed from the API server, never from
// here, so what is newest is never stale either.
//
// A Decoded is safe for concurrent use and may be shared by every driver
// of a process; it keeps at most its budget of decoded bytes, dropping the
// records read least recently.
type Decoded struct {
	mu     sync.Mutex
	budget int
	size   int
	byUID  map[types.UID]*list.Element
	// order has the most recently read record first.
	order *list.List
	// charts keeps one copy of each chart the kept records carry.
	charts map[chartDigest]*sharedChart
	// hits and misses count reads, for tests and benchmarks.
	hits, misses uint64
}

type decodedEntry struct {
	uid     types.UID
	version string
	rls     *releasev1.Release
	// cost is what the record costs apart from a shared chart.
	cost int
	// chart is the digest of the shared chart rls holds, if it holds one.
	chart       chartDigest
	sharesChart bool
}

// NewDecoded returns a cache keeping at most budget bytes of decoded
// record JSON; a budget of 0 or less keeps nothing.
func NewDecoded(budget int) *Decoded {
	return &Decoded{budget: budget, byUID: map[types.UID]*list.Element{}, order: list.New(), charts: map[chartDigest]*sharedChart{}}
}

// get returns the release item decodes to when it was decoded at this
// resourceVersion before, else nil.
func (d *Decoded) get(item *corev1.Secret) *releasev1.Release {
	if d == nil || !cacheable(item) {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	el, ok := d.byUID[item.UID]
	if !ok || el.Value.(*decodedEntry).version != item.ResourceVersion {
		d.misses++
		return nil
	}
	d.hits++
	d.order.MoveToFront(el)
	return shareable(el.Value.(*decodedEntry).rls, item.Labels)
}

// put remembers rls as what item decodes to; cost is its decoded size.
func (d *Decoded) put(item *corev1.Secret, rls *releasev1.Release, cost int) {
	if d == nil || !cacheable(item) || cost > d.budget {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.byUID[item.UID]; ok {
		d.remove(el)
	}
	entry := &decodedEntry{uid: item.UID, version: item.ResourceVersion, rls: shareable(rls, nil), cost: cost}
	if key, chartCost, ok := d.shareChart(entry.rls); ok {
		entry.chart, entry.sharesChart = key, true
		entry.cost = max(cost-chartCost, 0)
	}
	d.byUID[item.UID] = d.order.PushFront(entry)
	d.size += entry.cost
	for d.size > d.budget && d.order.Len() > 0 {
		d.remove(d.order.Back())
	}
}

func (d *Decoded) remove(el *list.Element) {
	e := d.order.Remove(el).(*decodedEntry)
	delete(d.byUID, e.uid)
	d.size -= e.cost
	if e.sharesChart {
		d.releaseChart(e.chart)
	}
}

// Stats returns how many reads found their record decoded already and how
// many did not.
func (d *Decoded) Stats() (hits, misses uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hits, d.misses
}

// cacheable: only a record the API server identified can be told apart
// from its later versions.
func cacheable(item *corev1.Secret) bool {
	return item.UID != "" && item.ResourceVersion != ""
}

// shareable is a copy of rls that can be handed out while the cache keeps
// rls: its status information, hooks and labels are its own, since those
// are what Helm and our callers change in place (an unlock marks the
// release failed, a hook run stamps its hook). The chart, values and
// manifest are shared and only read: a change to them is a write to
// storage, which gives the record a new resourceVersion.
func shareable(rls *releasev1.Release, labels map[string]string) *releasev1.Release {
	c := *rls
	if rls.Info != nil {
		info := *rls.Info
		c.Info = &info
	}
	if rls.Hooks != nil {
		c.Hooks = make([]*releasev1.Hook, len(rls.Hooks))
		for i, h := range rls.Hooks {
			if h != nil {
				hc := *h
				c.Hooks[i] = &hc
			}
		}
	}
	c.Labels = labels
	return &c
}
