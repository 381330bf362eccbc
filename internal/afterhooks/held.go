package afterhooks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

// DefaultTimeout is the readiness wait timeout when Target.Timeout is not
// positive; it matches internal/action.DefaultTimeout.
const DefaultTimeout = 5 * time.Minute

// MaxDescriptionLength bounds the failure description Fail records.
const MaxDescriptionLength = 4096

var (
	// ErrNotHeld is returned by Commit and Fail when there is no held
	// revision: Helm did not get to mark it deployed (it failed, or never
	// created it), or Commit or Fail already ran.
	ErrNotHeld = errors.New("afterhooks: no revision is held for its readiness wait")

	// ErrNotAwaiting is returned by Recover when the latest revision of the
	// release is not one left awaiting readiness by this package.
	ErrNotAwaiting = errors.New("afterhooks: the latest revision is not awaiting readiness")

	// ErrChanged is returned by Commit and Fail when the stored target is no
	// longer the pending revision they held (someone else wrote it).
	ErrChanged = errors.New("afterhooks: the held revision changed in storage")

	// ErrProtected is returned by the wrapper's Delete for a deployed
	// revision whose superseding is deferred.
	ErrProtected = errors.New("afterhooks: revision is protected while its successor awaits readiness")
)

// Target identifies the revision whose "deployed" record Wrap holds back.
type Target struct {
	// Name is the Helm release name.
	Name string

	// Version is the revision Helm is about to create. Zero means "the
	// next one": the first revision of Name created through the wrapper,
	// which for install, upgrade and rollback is the one the action
	// creates.
	Version int

	// Timeout is the readiness wait timeout. The deadline recorded in the
	// marker is the time Helm reports the revision deployed (its post hooks
	// done) plus Timeout; DefaultTimeout when not positive.
	Timeout time.Duration

	// Now is the clock; nil means time.Now.
	Now func() time.Time

	// OnHookStarted, when set, is told each time Helm starts a hook of the
	// target revision, so the caller can report progress. It is called
	// with no lock held, possibly from one of Helm's goroutines.
	OnHookStarted func(HookProgress)
}

// Wrap returns a driver that behaves like d for Helm, except that the
// target's "deployed" update is stored as pending with the afterHooks
// marker and that other revisions of the release are not superseded; see
// the package documentation. The returned Held finishes the job once the
// readiness wait is over. Use a new Wrap for every action.
func Wrap(d driver.Driver, t Target) (driver.Driver, *Held) {
	if t.Timeout <= 0 {
		t.Timeout = DefaultTimeout
	}
	if t.Now == nil {
		t.Now = time.Now
	}
	h := &Held{name: t.Name, armed: true, target: t}
	if t.Version > 0 {
		h.key = releaseKey(t.Name, t.Version)
		h.version = t.Version
	}
	return &recorder{inner: d, held: h}, h
}

// Held is what Wrap held back: the target revision as Helm wanted to record
// it (deployed) and the revisions whose superseding was deferred.
type Held struct {
	mu sync.Mutex

	name   string
	target Target
	// lastHook is the hook progress last reported to OnHookStarted.
	lastHook HookProgress
	// armed: the wrapper still intercepts writes (until Commit or Fail).
	armed bool

	// key and version of the target, once known.
	key     string
	version int
	// pending is the target's pending status, as created.
	pending common.Status

	// release is Helm's final record of the target (status deployed), set
	// when held; nil otherwise.
	release *releasev1.Release
	// onSuccess is the description Helm gave the deployed record.
	onSuccess string
	deadline  time.Time

	// helmFailed: Helm itself wrote the target with a final, non-deployed
	// status (failed); everything passed through.
	helmFailed bool

	// deferred supersede writes, by key.
	deferred map[string]*releasev1.Release
}

// Holding tells whether a deployed record is held: Helm finished the action
// (post hooks included) and Commit or Fail has not run yet.
func (h *Held) Holding() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.release != nil
}

// Release returns a copy of the held revision as Helm wanted to record it
// (status deployed), or nil when nothing is held. Note that the release an
// action returns to its caller also says deployed while storage says
// pending.
func (h *Held) Release() *releasev1.Release {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release == nil {
		return nil
	}
	return cloneRelease(h.release)
}

// Version is the target revision, or 0 when Helm did not create it.
func (h *Held) Version() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// Deadline is when the readiness wait times out; zero when nothing is held.
func (h *Held) Deadline() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// Commit records the readiness wait's success: the deferred revisions
// become superseded, then the target becomes deployed with the description
// Helm gave it (the order Helm uses, so an interruption between the writes
// leaves the target pending and resumable). d is the driver to write to; the
// wrapper returned by Wrap is accepted and bypassed. It returns the
// committed revision.
func (h *Held) Commit(ctx context.Context, d driver.Driver) (*releasev1.Release, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.finishableLocked(ctx, d)
	if err != nil {
		return nil, err
	}
	for _, r := range h.sortedDeferredLocked() {
		key := releaseKey(r.Name, r.Version)
		if _, err := d.Get(key); errors.Is(err, driver.ErrReleaseNotFound) {
			continue // pruned, as Helm would have pruned it after superseding
		} else if err != nil {
			return nil, fmt.Errorf("afterhooks: reading revision %d of %q: %w", r.Version, r.Name, err)
		}
		if err := d.Update(key, cloneRelease(r)); err != nil {
			return nil, fmt.Errorf("afterhooks: superseding revision %d of %q: %w", r.Version, r.Name, err)
		}
		delete(h.deferred, key)
	}
	rel := cloneRelease(h.release)
	rel.Info.Status = common.StatusDeployed
	rel.Info.Description = h.onSuccess
	if err := d.Update(h.key, rel); err != nil {
		return nil, fmt.Errorf("afterhooks: marking revision %d of %q deployed: %w", rel.Version, rel.Name, err)
	}
	h.finishLocked()
	return cloneRelease(rel), nil
}

// Fail records the readiness wait's failure: the target becomes failed
// with a description built from reason (say, WaitReady's error, which names
// what is not ready), in the words Helm uses for a failed wait. The
// deferred supersedes are dropped, so the previous revision stays as it was
// (deployed). d is as for Commit. It returns the failed revision.
func (h *Held) Fail(ctx context.Context, d driver.Driver, reason string) (*releasev1.Release, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.finishableLocked(ctx, d)
	if err != nil {
		return nil, err
	}
	rel := cloneRelease(h.release)
	rel.Info.Status = common.StatusFailed
	rel.Info.Description = failureDescription(h.pending, rel.Name, reason)
	if err := d.Update(h.key, rel); err != nil {
		return nil, fmt.Errorf("afterhooks: marking revision %d of %q failed: %w", rel.Version, rel.Name, err)
	}
	h.finishLocked()
	return cloneRelease(rel), nil
}

// checkStoredLocked makes sure storage still holds the pending target.
// finishableLocked checks that Commit or Fail may write: the context is
// live, a revision is held and storage still holds it pending. It returns
// the driver to write to, past any wrapper.
func (h *Held) finishableLocked(ctx context.Context, d driver.Driver) (driver.Driver, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if h.release == nil {
		return nil, ErrNotHeld
	}
	d = unwrap(d)
	if err := h.checkStoredLocked(d); err != nil {
		return nil, err
	}
	return d, nil
}

func (h *Held) checkStoredLocked(d driver.Driver) error {
	stored, err := d.Get(h.key)
	if err != nil {
		return fmt.Errorf("afterhooks: reading revision %d of %q: %w", h.version, h.name, err)
	}
	rel, err := toV1(stored)
	if err != nil {
		return err
	}
	if rel == nil || rel.Info == nil || rel.Info.Status != h.pending {
		got := "nothing"
		if rel != nil && rel.Info != nil {
			got = rel.Info.Status.String()
		}
		return fmt.Errorf("%w: revision %d of %q is %s, want %s", ErrChanged, h.version, h.name, got, h.pending)
	}
	return nil
}

func (h *Held) finishLocked() {
	h.armed = false
	h.release = nil
	h.deferred = nil
}

func (h *Held) sortedDeferredLocked() []*releasev1.Release {
	rs := make([]*releasev1.Release, 0, len(h.deferred))
	for _, r := range h.deferred {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Version < rs[j].Version })
	return rs
}

// Recover rebuilds the Held of a release whose latest revision was left
// awaiting readiness (see IsAwaitingReadiness), typically after a restart.
// The deferred supersedes are all other deployed revisions of the release
// (Helm supersedes the deployed revision on upgrade and every deployed
// revision on rollback); an uninstalled revision that an install with
// Replace would have superseded stays uninstalled. It returns
// ErrNotAwaiting when the latest revision is not awaiting readiness.
func Recover(d driver.Driver, name string) (*Held, error) {
	d = unwrap(d)
	items, err := d.Query(map[string]string{"name": name, "owner": "helm"})
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, fmt.Errorf("%w: release %q has no revisions", ErrNotAwaiting, name)
	}
	if err != nil {
		return nil, fmt.Errorf("afterhooks: reading history of %q: %w", name, err)
	}
	var rels []*releasev1.Release
	for _, item := range items {
		rel, err := toV1(item)
		if err != nil {
			return nil, err
		}
		if rel != nil && rel.Info != nil {
			rels = append(rels, cloneRelease(rel))
		}
	}
	if len(rels) == 0 {
		return nil, fmt.Errorf("%w: release %q has no revisions", ErrNotAwaiting, name)
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Version > rels[j].Version })
	latest := rels[0]
	m, ok := parseMarker(latest.Info.Description)
	if !ok || !isPendingAction(latest.Info.Status) {
		return nil, fmt.Errorf("%w: revision %d of %q is %s (%q)", ErrNotAwaiting, latest.Version, name, latest.Info.Status, latest.Info.Description)
	}
	h := &Held{
		name:      name,
		key:       releaseKey(name, latest.Version),
		version:   latest.Version,
		pending:   latest.Info.Status,
		release:   latest,
		onSuccess: m.onSuccess,
		deadline:  m.deadline,
		deferred:  map[string]*releasev1.Release{},
	}
	latest.Info.Status = common.StatusDeployed
	latest.Info.Description = m.onSuccess
	for _, r := range rels[1:] {
		if r.Info.Status == common.StatusDeployed {
			r.Info.Status = common.StatusSuperseded
			h.deferred[releaseKey(name, r.Version)] = r
		}
	}
	return h, nil
}

// failureDescription words a failed wait as Helm does for the action.
func failureDescription(pending common.Status, name, reason string) string {
	var desc string
	if pending == common.StatusPendingUpgrade {
		desc = fmt.Sprintf("Upgrade %q failed: %s", name, reason)
	} else {
		desc = fmt.Sprintf("Release %q failed: %s", name, reason)
	}
	if len(desc) > MaxDescriptionLength {
		const ellipsis = " ..."
		cut := MaxDescriptionLength - len(ellipsis)
		// Do not split a UTF-8 sequence.
		for cut > 0 && desc[cut]&0xC0 == 0x80 {
			cut--
		}
		desc = desc[:cut] + ellipsis
	}
	return desc
}

// recorder is the driver Wrap returns.
type recorder struct {
	inner driver.Driver
	held  *Held
}

var _ driver.Driver = (*recorder)(nil)

func unwrap(d driver.Driver) driver.Driver {
	for {
		r, ok := d.(*recorder)
		if !ok {
			return d
		}
		d = r.inner
	}
}

func (r *recorder) Name() string { return r.inner.Name() }

func (r *recorder) Get(key string) (release.Releaser, error) {
	rel, err := r.inner.Get(key)
	return cloneReleaser(rel), err
}

func (r *recorder) List(filter func(release.Releaser) bool) ([]release.Releaser, error) {
	rels, err := r.inner.List(filter)
	return cloneReleasers(rels), err
}

func (r *recorder) Query(labels map[string]string) ([]release.Releaser, error) {
	rels, err := r.inner.Query(labels)
	return cloneReleasers(rels), err
}

func (r *recorder) Create(key string, rls release.Releaser) error {
	rel, err := toV1(rls)
	if err != nil || rel == nil || rel.Info == nil {
		return r.inner.Create(key, rls)
	}
	h := r.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed || rel.Name != h.name || h.pending != "" {
		return r.inner.Create(key, cloneRelease(rel))
	}
	if (h.version == 0 || h.version == rel.Version) && isPendingAction(rel.Info.Status) {
		if err := r.inner.Create(key, cloneRelease(rel)); err != nil {
			return err
		}
		h.key, h.version, h.pending = key, rel.Version, rel.Info.Status
		return nil
	}
	// Helm creates a revision other than the target: this action is not
	// the one to hold. Behave like the plain driver from now on.
	for _, d := range h.sortedDeferredLocked() {
		if err := r.inner.Update(releaseKey(d.Name, d.Version), d); err != nil {
			return err
		}
	}
	h.deferred = nil
	h.armed = false
	return r.inner.Create(key, cloneRelease(rel))
}

func (r *recorder) Update(key string, rls release.Releaser) error {
	rel, err := toV1(rls)
	if err != nil || rel == nil || rel.Info == nil {
		return r.inner.Update(key, rls)
	}
	h := r.held
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.armed || rel.Name != h.name {
		return r.inner.Update(key, cloneRelease(rel))
	}
	if key == h.key && h.pending != "" {
		return h.updateTargetLocked(r.inner, key, rel)
	}
	if key != h.key && rel.Info.Status == common.StatusSuperseded && !h.helmFailed {
		if h.deferred == nil {
			h.deferred = map[string]*releasev1.Release{}
		}
		h.deferred[key] = cloneRelease(rel)
		return nil
	}
	return r.inner.Update(key, cloneRelease(rel))
}

// updateTargetLocked handles an update of the target revision.
func (h *Held) updateTargetLocked(inner driver.Driver, key string, rel *releasev1.Release) error {
	switch {
	case rel.Info.Status == common.StatusDeployed:
		if h.helmFailed {
			// Helm already failed the revision (a cancelled context) and
			// went on in the background: keep the failure.
			return nil
		}
		now := h.target.Now()
		held := cloneRelease(rel)
		stored := cloneRelease(rel)
		stored.Info.Status = h.pending
		m := marker{deadline: now.Add(h.target.Timeout).Truncate(time.Second), onSuccess: rel.Info.Description}
		stored.Info.Description = m.String()
		if err := inner.Update(key, stored); err != nil {
			return err
		}
		h.release, h.onSuccess, h.deadline = held, m.onSuccess, m.deadline
		return nil
	case rel.Info.Status == h.pending:
		// Hook progress (LastRun) while the action runs.
		if err := inner.Update(key, cloneRelease(rel)); err != nil {
			return err
		}
		if p, ok := runningHook(rel, h.pending); ok && h.target.OnHookStarted != nil && p != h.lastHook {
			h.lastHook = p
			// Report after the lock is released: the callback may be slow.
			defer func() { go h.target.OnHookStarted(p) }()
		}
		return nil
	case h.release != nil && canceledByHelmsContext(rel):
		// Helm finished the action (the deployed record is held) as its
		// context was canceled, the controller stopping, and its context
		// watcher then fails the revision. The interruption is the
		// controller's: the revision stays pending with its deadline, as
		// an interrupted readiness wait leaves it, for the next run to
		// resume.
		return nil
	default:
		// Helm's own outcome (failed): pass it through as Helm would
		// have written it, deferred supersedes first (rollback supersedes
		// the current revision when the apply fails).
		for _, d := range h.sortedDeferredLocked() {
			if err := inner.Update(releaseKey(d.Name, d.Version), d); err != nil {
				return err
			}
		}
		h.deferred = nil
		h.helmFailed = true
		h.release = nil
		return inner.Update(key, cloneRelease(rel))
	}
}

// canceledByHelmsContext tells whether rel is the failure Helm writes when
// the context of its action is canceled ("Release %q failed: context
// canceled"); a timeout (deadline exceeded) is a real failure.
func canceledByHelmsContext(rel *releasev1.Release) bool {
	return rel.Info.Status == common.StatusFailed && strings.HasSuffix(rel.Info.Description, ": "+context.Canceled.Error())
}

func (r *recorder) Delete(key string) (release.Releaser, error) {
	h := r.held
	h.mu.Lock()
	protected := h.armed && h.deferred[key] != nil
	h.mu.Unlock()
	if protected {
		stored, err := r.inner.Get(key)
		if err == nil {
			if rel, _ := toV1(stored); rel != nil && rel.Info != nil && rel.Info.Status == common.StatusDeployed {
				return nil, fmt.Errorf("%w: %s", ErrProtected, key)
			}
		}
	}
	return r.inner.Delete(key)
}

// releaseKey is Helm's storage key (pkg/storage/storage.go makeKey).
func releaseKey(name string, version int) string {
	return "sh.helm.release.v1." + name + ".v" + strconv.Itoa(version)
}

func toV1(rls release.Releaser) (*releasev1.Release, error) {
	switch r := rls.(type) {
	case nil:
		return nil, nil
	case *releasev1.Release:
		return r, nil
	case releasev1.Release:
		return &r, nil
	default:
		return nil, fmt.Errorf("afterhooks: unsupported release type %T", rls)
	}
}

// cloneRelease copies what Helm mutates in place: the release, its Info,
// its hooks and its labels. Chart, values and manifest are shared.
func cloneRelease(r *releasev1.Release) *releasev1.Release {
	if r == nil {
		return nil
	}
	c := *r
	if r.Info != nil {
		info := *r.Info
		c.Info = &info
	}
	if r.Hooks != nil {
		c.Hooks = make([]*releasev1.Hook, len(r.Hooks))
		for i, hk := range r.Hooks {
			if hk != nil {
				hc := *hk
				c.Hooks[i] = &hc
			}
		}
	}
	c.Labels = maps.Clone(r.Labels)
	return &c
}

func cloneReleaser(rls release.Releaser) release.Releaser {
	if rel, ok := rls.(*releasev1.Release); ok && rel != nil {
		return cloneRelease(rel)
	}
	return rls
}

func cloneReleasers(rls []release.Releaser) []release.Releaser {
	if rls == nil {
		return nil
	}
	out := make([]release.Releaser, len(rls))
	for i, r := range rls {
		out[i] = cloneReleaser(r)
	}
	return out
}
