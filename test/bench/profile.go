package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// cpuProfileSeconds is how long the CPU profile of the install phase runs,
// restartProfileSeconds that of the restart. Each phase waits for its
// profile before the next begins.
const (
	cpuProfileSeconds     = 30
	restartProfileSeconds = 10
)

// noopProfileSeconds is how long the CPU profile of the no-op phase runs
// for n releases: long enough to span the whole phase, which the client's
// rate limit paces (two requests per no-op at the default 50 QPS, n/25
// seconds). A shorter profile would hold only its start, when the watch
// events of every request arrive at once and the reconciles have barely
// begun, and overstate decoding.
func noopProfileSeconds(n int) int {
	return 10 + n/25
}

// pendingProfile is a CPU profile being taken in the background.
type pendingProfile struct {
	done chan error
}

// wait returns once the profile is written; a nil profile (none asked
// for) is done at once.
func (p *pendingProfile) wait() error {
	if p == nil {
		return nil
	}
	return <-p.done
}

// joinProfiles is done when every one of ps is, with their errors.
func joinProfiles(ps ...*pendingProfile) *pendingProfile {
	joined := &pendingProfile{done: make(chan error, 1)}
	go func() {
		var errs []error
		for _, p := range ps {
			errs = append(errs, p.wait())
		}
		joined.done <- errors.Join(errs...)
	}()
	return joined
}

// startCPUProfile asks ours for a CPU profile of seconds from its pprof
// endpoint (served beside the metrics) and saves it as kind when it
// arrives. It returns nil when no profile is wanted; upstream is never
// profiled.
func (r *run) startCPUProfile(ctx context.Context, seconds int, kind string) *pendingProfile {
	if r.opts.ProfileDir == "" || !isOurs(r.controller) {
		return nil
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", r.ctls[0].metricsBase, seconds)
	return r.profileInBackground(ctx, seconds, kind, func(ctx context.Context) ([]byte, error) {
		return fetch(ctx, url)
	})
}

// startAPIServerProfile takes a CPU profile of the cluster's kube-apiserver
// for seconds, as kind, while the fleet is installed: at a few thousand
// releases the API server, not the controller, sets the pace, and its
// profile shows for which requests. Taken for every controller, so the
// two can be compared; nil when no profile is wanted.
func (r *run) startAPIServerProfile(ctx context.Context, seconds int, kind string) *pendingProfile {
	if r.opts.ProfileDir == "" {
		return nil
	}
	return r.profileInBackground(ctx, seconds, kind, func(ctx context.Context) ([]byte, error) {
		return r.env.apiServer.Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
	})
}

// profileInBackground runs take, which answers only after the profile's
// seconds, and writes what it returns as kind.
func (r *run) profileInBackground(ctx context.Context, seconds int, kind string, take func(context.Context) ([]byte, error)) *pendingProfile {
	p := &pendingProfile{done: make(chan error, 1)}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+time.Minute)
		defer cancel()
		data, err := take(ctx)
		if err != nil {
			p.done <- fmt.Errorf("taking the %s profile: %w", kind, err)
			return
		}
		p.done <- r.writeProfile(data, kind)
	}()
	return p
}

// saveHeapProfile saves ours' heap profile as kind. It asks for a garbage
// collection first (gc=1): a heap profile is as of the last collection,
// and without one the allocations since then (at the no-op phase's start,
// the install's tail) would be counted in the next profile instead. The
// bench takes heap profiles only outside the phases it measures.
func (r *run) saveHeapProfile(ctx context.Context, kind string) error {
	if r.opts.ProfileDir == "" || !isOurs(r.controller) {
		return nil
	}
	return r.saveProfile(ctx, r.ctls[0].metricsBase+"/debug/pprof/heap?gc=1", kind)
}

// saveProfile writes what url returns to <dir>/<controller>-n<N>-<kind>.pprof.
func (r *run) saveProfile(ctx context.Context, url, kind string) error {
	data, err := fetch(ctx, url)
	if err != nil {
		return fmt.Errorf("taking the %s profile: %w", kind, err)
	}
	return r.writeProfile(data, kind)
}

// writeProfile writes data to <dir>/<controller>-n<N>-<kind>.pprof.
func (r *run) writeProfile(data []byte, kind string) error {
	if err := os.MkdirAll(r.opts.ProfileDir, 0o755); err != nil {
		return fmt.Errorf("creating the profile directory: %w", err)
	}
	path := filepath.Join(r.opts.ProfileDir, fmt.Sprintf("%s-n%d-%s.pprof", r.controller, r.releases, kind))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("saving the %s profile: %w", kind, err)
	}
	fmt.Fprintf(r.progress, "%s profile saved to %s\n", kind, path)
	return nil
}
