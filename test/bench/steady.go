package bench

import (
	"context"
	"fmt"
	"time"
)

// steadyPollInterval is how often a controller's liveness is checked while
// the fleet is left alone.
const steadyPollInterval = 5 * time.Second

// steadyPhase leaves the deployed fleet alone for Options.Steady after the
// restart and measures what the controllers cost at rest: the reconciles
// that the releases' interval brings, and nothing else. A window of at
// least one interval (plus its jitter) sees each release reconciled once;
// the figures are then scaled to an hour. No release may get a new
// revision on the way.
func (r *run) steadyPhase(ctx context.Context) error {
	if r.opts.Steady == 0 {
		return nil
	}
	before, err := r.begin(ctx)
	if err != nil {
		return err
	}
	reconcilesBefore, err := r.releaseReconciles(ctx)
	if err != nil {
		return err
	}
	kindsBefore, err := r.env.apiServerRequestsByKind(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "steady: leaving the fleet alone for %s (release interval %s)\n", r.opts.Steady, r.opts.Interval)
	began := time.Now()
	for time.Since(began) < r.opts.Steady {
		if err := sleep(ctx, min(steadyPollInterval, r.opts.Steady-time.Since(began))); err != nil {
			return err
		}
		if err := r.ctls.alive(); err != nil {
			return err
		}
	}
	after, err := r.end(ctx)
	if err != nil {
		return err
	}
	reconcilesAfter, err := r.releaseReconciles(ctx)
	if err != nil {
		return err
	}
	kindsAfter, err := r.env.apiServerRequestsByKind(ctx)
	if err != nil {
		return err
	}
	revisions, err := r.env.countRevisions(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "steady: API requests per release in the window, the most frequent (all clients): %s\n",
		topGrowth(kindsBefore, kindsAfter, r.releases, 8))
	r.row.Steady = SteadyState{
		Interval:           r.opts.Interval,
		Window:             time.Since(began),
		Reconciles:         reconcilesAfter - reconcilesBefore,
		CPU:                after.cpu - before.cpu,
		APIRequests:        after.apiRequests - before.apiRequests,
		ControllerRequests: after.controllerRequests - before.controllerRequests,
	}
	fmt.Fprintf(r.progress, "steady: %.0f reconciles in %s, controller CPU %s, %.0f controller requests, new revisions since the install %d\n",
		r.row.Steady.Reconciles, r.row.Steady.Window.Round(time.Second), r.row.Steady.CPU,
		r.row.Steady.ControllerRequests, revisions-r.releases)
	if revisions != r.releases {
		return fmt.Errorf("%d new Helm revisions at rest; a fleet left alone must make none", revisions-r.releases)
	}
	return nil
}

// releaseReconciles is how many HelmRelease reconciles the controllers
// have recorded since they started.
func (r *run) releaseReconciles(ctx context.Context) (float64, error) {
	var total float64
	for _, c := range r.ctls {
		body, err := fetch(ctx, c.metricsBase+"/metrics")
		if err != nil {
			return 0, fmt.Errorf("scraping the %s controller's metrics: %w", c.name, err)
		}
		n, err := reconcilesOfKind(string(body), "HelmRelease")
		if err != nil {
			return 0, fmt.Errorf("%s controller: %w", c.name, err)
		}
		total += n
	}
	return total, nil
}

// reconcilesOfKind adds up the reconcile counts of every object of kind in
// the exposition.
func reconcilesOfKind(exposition, kind string) (float64, error) {
	var total float64
	err := eachSample(exposition, reconcileCount, func(labels map[string]string, v float64) {
		if labels["kind"] == kind {
			total += v
		}
	})
	return total, err
}

// SteadyState is what the controllers cost while the deployed fleet was
// left alone for Window, each release reconciled at Interval.
type SteadyState struct {
	Interval           time.Duration
	Window             time.Duration
	Reconciles         float64
	CPU                time.Duration
	APIRequests        float64 // all clients
	ControllerRequests float64
}

// measured is false for runs without a steady phase.
func (s SteadyState) measured() bool { return s.Window > 0 }

// perHour scales a quantity seen over the window to an hour.
func (s SteadyState) perHour(v float64) float64 {
	return v * float64(time.Hour) / float64(s.Window)
}

// SteadyTable has one row per run that measured the steady state; it has
// no rows when none did.
func SteadyTable(rows []Row) Table {
	t := Table{Header: []string{
		"controller", "N", "release interval", "window (s)", "reconciles per release",
		"controller CPU per hour (s)", "CPU per reconcile (ms)",
		"API requests per release per hour", "controller requests per release per hour",
	}}
	for _, r := range rows {
		s := r.Steady
		if !s.measured() {
			continue
		}
		n := float64(r.Releases)
		perReconcile := notAvailable
		if s.Reconciles > 0 {
			perReconcile = fmt.Sprintf("%.1f", milliseconds(s.CPU)/s.Reconciles)
		}
		t.Rows = append(t.Rows, []string{
			controllerLabel(r.Controller, r.Shards),
			fmt.Sprint(r.Releases),
			s.Interval.String(),
			fmt.Sprintf("%.0f", s.Window.Seconds()),
			fmt.Sprintf("%.2f", s.Reconciles/n),
			fmt.Sprintf("%.1f", s.perHour(s.CPU.Seconds())),
			perReconcile,
			fmt.Sprintf("%.1f", s.perHour(s.APIRequests)/n),
			fmt.Sprintf("%.1f", s.perHour(s.ControllerRequests)/n),
		})
	}
	return t
}
