package afterhooks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// Readiness is the wait Helm would run for the release's resources if it
// waited itself: afterHooks runs it after the post hooks instead.
type Readiness struct {
	// Strategy is kube.StatusWatcherStrategy or kube.LegacyStrategy.
	Strategy kube.WaitStrategy
	// WaitForJobs waits for Jobs to complete too.
	WaitForJobs bool
	// Timeout bounds the wait; DefaultTimeout when not positive.
	Timeout time.Duration
}

// Action describes one install, upgrade or rollback run with waitStrategy
// afterHooks.
type Action struct {
	// Verb is install, upgrade or rollback; it names the action in
	// messages, events and metrics.
	Verb helmverb.Verb
	// Release is the Helm release name.
	Release string
	// Readiness is the wait that runs after the post hooks.
	Readiness Readiness
	// CleanupOnFail deletes what the action created when the readiness wait
	// fails, as Helm's cleanupOnFail does when its own wait fails.
	CleanupOnFail bool
	// StatusReaders judge readiness before kstatus' own rules do.
	StatusReaders []engine.StatusReader
	// Abandon, when it ends, abandons the readiness wait for a newer
	// desired state (CancelHealthCheckOnNewRevision): the revision is
	// failed, as Helm fails a revision whose wait is cancelled, and the
	// error returned wraps context.Canceled. Its context.Cause, if any,
	// says why. Nil: only the timeout and ctx end the wait.
	Abandon context.Context
	// Observer hears what the action does; may be nil.
	Observer Observer
}

// Observer hears the phases of an afterHooks action, for events, progress
// conditions and metrics. HookStarted may be called from Helm's
// goroutines; no method is called after Run or Resume returned.
type Observer interface {
	// Started: Helm starts the pre hooks, apply and post hooks.
	Started(verb helmverb.Verb)
	// HookStarted: Helm started a hook of the target revision.
	HookStarted(HookProgress)
	// Waiting: the readiness wait of rel starts, for up to timeout;
	// resumed when an earlier run of the controller ran the hooks.
	Waiting(verb helmverb.Verb, rel *releasev1.Release, timeout time.Duration, resumed bool)
	// PhaseDone: a phase ("helm" or "readiness") ended after took.
	PhaseDone(verb helmverb.Verb, phase string, took time.Duration)
}

// Start prepares cfg for a's install, upgrade or rollback with
// waitStrategy afterHooks. It returns the configuration Helm's action must
// run on, with Helm's hookOnly wait strategy: a copy of cfg whose storage
// holds back the "deployed" record (see Wrap) and whose kube client awaits
// hook deletions and records what the apply creates. finish must be called
// with what Helm's action returned: once Helm is done, post hooks
// included, it waits for the release's resources and records the revision
// deployed, or failed (after cleanupOnFail) with what is not ready.
//
// finish returns the release as stored at the end. When Helm fails,
// nothing is held and Helm's release and error come back as they are.
// When ctx ends during the readiness wait, the revision stays pending for
// Resume and the returned error wraps ctx's.
func Start(ctx context.Context, cfg *helmaction.Configuration, a Action) (*helmaction.Configuration, func(*releasev1.Release, error) (*releasev1.Release, error), error) {
	if cfg == nil || cfg.Releases == nil || cfg.KubeClient == nil {
		return nil, nil, errors.New("afterhooks: configuration without storage or kube client")
	}
	obs := newGate(a.Observer)
	raw := cfg.Releases.Driver
	wrapped, held := Wrap(raw, Target{Name: a.Release, Timeout: a.Readiness.Timeout, OnHookStarted: obs.hookStarted})
	kc := wrapKubeClient(cfg.KubeClient, a.Readiness.Strategy)

	obs.started(a.Verb)
	started := time.Now()
	finishHelm := func(rel *releasev1.Release, err error) (*releasev1.Release, error) {
		// Helm can return (a cancelled ctx) while its goroutines still
		// report hooks; from here on they are not heard.
		obs.closeHooks()
		obs.phaseDone(a.Verb, "helm", time.Since(started))
		if err != nil {
			return rel, err
		}
		if !held.Holding() {
			// Helm only logs a failed final storage write, so "success"
			// can come back with nothing held: no readiness wait ran, and
			// the revision in storage (if any) is not the one Helm
			// reported.
			return rel, fmt.Errorf("Helm %s reported success but its final release record never reached storage, so the readiness wait did not run", a.Verb)
		}
		timeout := time.Until(held.Deadline())
		if timeout <= 0 || timeout > a.Readiness.Timeout {
			timeout = a.Readiness.Timeout
		}
		obs.waiting(a.Verb, held.Release(), a.Readiness.Timeout, false)
		return finish(ctx, cfg.KubeClient, raw, held, a, obs, timeout, kc.Created())
	}
	return withStorageAndClient(cfg, wrapped, kc), finishHelm, nil
}

// Resume finishes the readiness wait of the latest revision of a.Release,
// which an earlier run of the controller left pending with the afterHooks
// marker (it stopped or lost leadership during the wait). No hook runs
// again: only the wait, for what is left of its deadline (see
// ResumeTimeout), then deployed or failed as in Run. What that run created
// is not known any more, so a failed resumed upgrade deletes nothing.
func Resume(ctx context.Context, cfg *helmaction.Configuration, a Action) (*releasev1.Release, error) {
	if cfg == nil || cfg.Releases == nil || cfg.KubeClient == nil {
		return nil, errors.New("afterhooks: configuration without storage or kube client")
	}
	raw := cfg.Releases.Driver
	held, err := Recover(raw, a.Release)
	if err != nil {
		return nil, fmt.Errorf("afterHooks: recovering the pending revision of %s: %w", a.Release, err)
	}
	obs := newGate(a.Observer)
	obs.closeHooks()
	timeout := ResumeTimeout(held.Deadline(), time.Now(), a.Readiness.Timeout)
	obs.waiting(a.Verb, held.Release(), timeout, true)
	return finish(ctx, cfg.KubeClient, raw, held, a, obs, timeout, nil)
}

// finish waits for the resources of the held revision and records the
// outcome in storage.
func finish(ctx context.Context, kc kube.Interface, raw driver.Driver, held *Held, a Action, obs *gate,
	timeout time.Duration, created kube.ResourceList) (*releasev1.Release, error) {
	target := held.Release()
	waitCtx, cancelWait := context.WithCancel(ctx)
	defer cancelWait()
	if a.Abandon != nil {
		stop := context.AfterFunc(a.Abandon, cancelWait)
		defer stop()
	}
	started := time.Now()
	waitErr := WaitReady(waitCtx, kc, target, a.Readiness.Strategy, a.Readiness.WaitForJobs, timeout,
		WithStatusReaders(a.StatusReaders...))
	obs.phaseDone(a.Verb, "readiness", time.Since(started))
	if waitErr == nil {
		committed, err := held.Commit(ctx, raw)
		if err != nil {
			return nil, fmt.Errorf("afterHooks: resources of %s.v%d are ready but recording it failed: %w", target.Name, target.Version, err)
		}
		return committed, nil
	}
	if ctx.Err() != nil {
		// Interrupted, not failed: the revision stays pending with its
		// deadline in storage.
		return nil, waitErr
	}
	reason, outcome := waitErr.Error(), afterPostHooks(a.Verb, waitErr)
	if a.Abandon != nil && a.Abandon.Err() != nil {
		cause := context.Cause(a.Abandon)
		reason, outcome = fmt.Sprintf("readiness wait canceled: %s", cause), fmt.Errorf("readiness wait abandoned: %w", waitErr)
	}
	failed, err := held.Fail(ctx, raw, reason)
	if err != nil {
		return nil, errors.Join(outcome, fmt.Errorf("afterHooks: recording the failure of %s.v%d: %w", target.Name, target.Version, err))
	}
	if a.CleanupOnFail && len(created) > 0 {
		if _, errs := kc.Delete(created, metav1.DeletePropagationBackground); len(errs) > 0 {
			return failed, fmt.Errorf("%w; cleanupOnFail could not delete what the revision created: %w", outcome, errors.Join(errs...))
		}
	}
	return failed, outcome
}

// afterPostHooks says that waitErr ended the readiness wait after the post
// hooks of verb. A wait that named what is not ready keeps its message
// first, upstream's words leading, and takes where it ran as a note.
func afterPostHooks(verb helmverb.Verb, waitErr error) error {
	if nre := (*NotReadyError)(nil); errors.As(waitErr, &nre) && len(nre.Resources) > 0 {
		return nre.withNote(fmt.Sprintf("readiness wait after the post-%s hooks", verb))
	}
	return fmt.Errorf("readiness wait after post-%s hooks failed: %w", verb, waitErr)
}

// withStorageAndClient returns a copy of cfg that stores releases in d and
// talks to the cluster through kc; everything else is shared.
func withStorageAndClient(cfg *helmaction.Configuration, d driver.Driver, kc kube.Interface) *helmaction.Configuration {
	handler := cfg.Logger().Handler()
	store := storage.Init(d)
	store.MaxHistory = cfg.Releases.MaxHistory
	store.SetLogger(handler)

	return helmclient.Reconfigured(cfg, kc, store)
}

// gate forwards to an Observer and stops forwarding hook reports once
// closed, waiting for one in flight, so a report from a Helm goroutine
// never lands after the action returned.
type gate struct {
	o Observer

	mu     sync.Mutex
	closed bool
}

func newGate(o Observer) *gate { return &gate{o: o} }

func (g *gate) started(verb helmverb.Verb) {
	if g.o != nil {
		g.o.Started(verb)
	}
}

func (g *gate) hookStarted(p HookProgress) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed && g.o != nil {
		g.o.HookStarted(p)
	}
}

func (g *gate) closeHooks() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (g *gate) waiting(verb helmverb.Verb, rel *releasev1.Release, timeout time.Duration, resumed bool) {
	if g.o != nil {
		g.o.Waiting(verb, rel, timeout, resumed)
	}
}

func (g *gate) phaseDone(verb helmverb.Verb, phase string, took time.Duration) {
	if g.o != nil {
		g.o.PhaseDone(verb, phase, took)
	}
}
