package afterhooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/helmverb"
)

// recordingObserver keeps what an afterHooks action reported.
type recordingObserver struct {
	mu      sync.Mutex
	events  []string
	hooks   int
	waiting []time.Duration
}

func (o *recordingObserver) Started(verb helmverb.Verb) { o.add("started " + string(verb)) }
func (o *recordingObserver) HookStarted(HookProgress) {
	o.mu.Lock()
	o.hooks++
	o.mu.Unlock()
}
func (o *recordingObserver) Waiting(verb helmverb.Verb, rel *releasev1.Release, timeout time.Duration, resumed bool) {
	o.mu.Lock()
	o.waiting = append(o.waiting, timeout)
	o.mu.Unlock()
	o.add(fmt.Sprintf("waiting %s v%d resumed=%t", verb, rel.Version, resumed))
}
func (o *recordingObserver) PhaseDone(_ helmverb.Verb, phase string, _ time.Duration) {
	o.add("done " + phase)
}

func (o *recordingObserver) add(s string) {
	o.mu.Lock()
	o.events = append(o.events, s)
	o.mu.Unlock()
}

func (o *recordingObserver) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.events, ", ")
}

func testAction(verb helmverb.Verb, o Observer) Action {
	return Action{Verb: verb, Release: relName,
		Readiness: Readiness{Strategy: kube.StatusWatcherStrategy, WaitForJobs: true, Timeout: time.Minute}, Observer: o}
}

// A real install through Run on a fake cluster: hooks, then the readiness
// wait, then deployed; the observer hears each phase in order.
func TestRunInstallCommits(t *testing.T) {
	e := newMemEnv()
	obs := &recordingObserver{}
	rel, err := run(context.Background(), e.config(nil, 0), testAction("install", obs), func(c *helmaction.Configuration) (*releasev1.Release, error) {
		in := helmaction.NewInstall(c)
		in.ReleaseName, in.Namespace, in.Timeout, in.WaitStrategy = relName, relNS, time.Minute, kube.HookOnlyStrategy
		r, err := in.Run(testChart("1.0.0"), nil)
		if err != nil {
			return nil, err
		}
		return toV1(r)
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rel.Info.Status != common.StatusDeployed {
		t.Errorf("Run returned %s, want deployed", rel.Info.Status)
	}
	if got := statuses(t, e.d); got != "v1=deployed" {
		t.Errorf("storage after Run: %s", got)
	}
	want := "started install, done helm, waiting install v1 resumed=false, done readiness"
	if got := obs.String(); got != want {
		t.Errorf("observer heard %q, want %q", got, want)
	}
}

// When Helm reports success but its final storage write never reached the
// wrapper (Helm only logs a failed final write), nothing is held and no
// readiness wait ran: that must not count as a success.
func TestRunSuccessWithoutHeldRevisionIsAnError(t *testing.T) {
	e := newMemEnv()
	rel := &releasev1.Release{Name: relName, Namespace: relNS, Version: 1, Info: &releasev1.Info{Status: common.StatusDeployed}}
	got, err := run(context.Background(), e.config(nil, 0), testAction("install", nil), func(*helmaction.Configuration) (*releasev1.Release, error) {
		return rel, nil
	})
	if err == nil {
		t.Fatalf("Run returned %v with no error although no readiness wait ran", got)
	}
	if !strings.Contains(err.Error(), "readiness wait did not run") {
		t.Errorf("error %q does not say the readiness wait did not run", err)
	}
}

// Helm's own failure comes back unchanged, so the caller can tell a
// cancellation (context.Canceled: a new revision cancelled Helm's CRD wait)
// from a failed action, as it does under beforeHooks.
func TestRunReturnsHelmErrorsAsTheyAre(t *testing.T) {
	e := newMemEnv()
	helmErr := fmt.Errorf("waiting for CRDs to be established: %w", context.Canceled)
	_, err := run(context.Background(), e.config(nil, 0), testAction("install", nil), func(*helmaction.Configuration) (*releasev1.Release, error) {
		return nil, helmErr
	})
	if !errors.Is(err, helmErr) || !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want Helm's error", err)
	}
}

// Helm can return (a cancelled context) while one of its goroutines still
// reports hooks; once Run returned, nothing more reaches the observer,
// which the controller lets write the HelmRelease the reconcile owns again.
func TestHookReportsStopWhenTheActionReturns(t *testing.T) {
	obs := &recordingObserver{}
	g := newGate(obs)
	started := make(chan struct{})
	var helm sync.WaitGroup
	helm.Add(1)
	go func() { // Helm's goroutine, still running after the action returned
		defer helm.Done()
		close(started)
		for i := 0; i < 1000; i++ {
			g.hookStarted(HookProgress{})
		}
	}()
	<-started
	g.closeHooks()
	obs.mu.Lock()
	atClose := obs.hooks
	obs.mu.Unlock()
	helm.Wait()
	if obs.hooks != atClose {
		t.Errorf("%d hook reports arrived after the action returned", obs.hooks-atClose)
	}
}
