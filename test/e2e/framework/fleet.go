package framework

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// FleetWorkers bounds the writes ForEach keeps in flight: enough to write
// a fleet of hundreds in seconds, few enough for the client's rate
// limiter.
const FleetWorkers = 8

// ForEach runs fn for 0 … n-1 on FleetWorkers goroutines and returns the
// first error; after one, the remaining calls are skipped.
func ForEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(FleetWorkers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// FleetWait is one wait for many HelmReleases of a namespace at once.
type FleetWait struct {
	Namespace string
	// Names are the releases waited for.
	Names []string
	// Check returns nil once a release is where the wait wants it.
	Check func(*v2.HelmRelease) error
	// Gone waits until the releases no longer exist instead; Check is not
	// used.
	Gone bool
	// Timeout bounds the wait.
	Timeout time.Duration
	// Interval spaces the lists; a second when zero.
	Interval time.Duration
	// Controller, when set, ends the wait at once if its process exits.
	Controller *Controller
	// Log, when set, gets a progress line every 15 s.
	Log func(format string, args ...any)
}

// WaitFleet lists the namespace's HelmReleases until every one of w.Names
// passes w.Check. It returns how long that took and, for the releases that
// never passed, why (keyed by name); the error says why the wait ended
// early or timed out.
func (e *Env) WaitFleet(w FleetWait) (took time.Duration, pending map[string]error, err error) {
	interval := w.Interval
	if interval == 0 {
		interval = time.Second
	}
	began := time.Now()
	lastLog := began
	ctx, cancel := context.WithTimeout(context.Background(), w.Timeout)
	defer cancel()
	for {
		if w.Controller != nil {
			if err := w.Controller.Running(); err != nil {
				return time.Since(began), pending, err
			}
		}
		if err := e.Controller.Running(); err != nil {
			return time.Since(began), pending, fmt.Errorf("the shared controller: %w", err)
		}
		var list v2.HelmReleaseList
		listErr := e.Client.List(ctx, &list, client.InNamespace(w.Namespace))
		if listErr == nil {
			pending = fleetPending(list.Items, w)
			if len(pending) == 0 {
				return time.Since(began), nil, nil
			}
		}
		if w.Log != nil && time.Since(lastLog) >= 15*time.Second {
			lastLog = time.Now()
			w.Log("%d of %d releases there after %s", len(w.Names)-len(pending), len(w.Names), time.Since(began).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			if pending == nil && listErr != nil {
				return time.Since(began), nil, fmt.Errorf("listing HelmReleases: %w", listErr)
			}
			return time.Since(began), pending, fmt.Errorf("%d of %d releases not there after %s: %s",
				len(pending), len(w.Names), w.Timeout, SummarizeFailures(pending, 5))
		case <-time.After(interval):
		}
	}
}

func fleetPending(items []v2.HelmRelease, w FleetWait) map[string]error {
	byName := make(map[string]*v2.HelmRelease, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
	}
	pending := map[string]error{}
	for _, name := range w.Names {
		hr, ok := byName[name]
		switch {
		case w.Gone && ok:
			pending[name] = fmt.Errorf("still there (deletionTimestamp %v, finalizers %v, %s)",
				hr.DeletionTimestamp, hr.Finalizers, Conditions(hr))
		case w.Gone:
		case !ok:
			pending[name] = errors.New("not found")
		default:
			if err := w.Check(hr); err != nil {
				pending[name] = err
			}
		}
	}
	return pending
}

// SummarizeFailures describes up to limit failures, sorted by name, and how
// many more there are.
func SummarizeFailures(failures map[string]error, limit int) string {
	names := make([]string, 0, len(failures))
	for name := range failures {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []string
	for i, name := range names {
		if i == limit {
			out = append(out, fmt.Sprintf("and %d more", len(names)-limit))
			break
		}
		out = append(out, fmt.Sprintf("%s: %v", name, failures[name]))
	}
	return strings.Join(out, "; ")
}

// ReleasesStorage reads the Helm storage of every release in ns with one
// list, keyed by release name, each oldest revision first.
func (e *Env) ReleasesStorage(ctx context.Context, ns string) (map[string][]Stored, error) {
	var list corev1.SecretList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		return nil, fmt.Errorf("listing Helm storage: %w", err)
	}
	out := map[string][]Stored{}
	for _, s := range list.Items {
		rel, err := DecodeRelease(s.Data["release"])
		if err != nil {
			return nil, fmt.Errorf("decoding Helm storage Secret %s: %w", s.Name, err)
		}
		out[rel.Name] = append(out[rel.Name], Stored{Secret: s, Release: *rel})
	}
	for _, stored := range out {
		sort.Slice(stored, func(i, j int) bool { return stored[i].Release.Version < stored[j].Release.Version })
	}
	return out, nil
}

// ReleaseEvents lists the events of every HelmRelease in ns that match
// want, keyed by release name, oldest first.
func (e *Env) ReleaseEvents(ctx context.Context, ns string, want EventWant) (map[string][]corev1.Event, error) {
	var list corev1.EventList
	if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	out := map[string][]corev1.Event{}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == helmv2.HelmReleaseKind && want.matches(ev) {
			out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], ev)
		}
	}
	for _, events := range out {
		sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).Before(eventTime(events[j])) })
	}
	return out, nil
}
