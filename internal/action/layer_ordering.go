package action

import (
	"context"
	"fmt"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// What the action layer hands to internal/sequencing
// (spec.waitStrategy.name ordered); stacked (stack.go) wraps the client:
// install and upgrade order the chart they apply and record that they
// did; rollback and uninstall follow what the revision they restore or
// remove recorded (the runner reads it into the plan), whatever the
// HelmRelease says now.

// orderChart prepares the sequenced install or upgrade of chrt: the chart
// with its record (see sequencing.Record) and its subchart facts. A broken
// sequencing annotation in Chart.yaml fails the action before anything is
// applied.
func orderChart(chrt *chartv2.Chart) (*chartv2.Chart, sequencing.Charts, error) {
	charts, err := sequencing.ChartsOf(chrt)
	if err != nil {
		return nil, nil, fmt.Errorf("ordered wait strategy: %w", err)
	}
	recorded, err := sequencing.Record(chrt, charts)
	if err != nil {
		return nil, nil, err
	}
	return recorded, charts, nil
}

// withOrdering returns a copy of cfg whose kube client applies in order
// the objects of charts. Batches are waited for with the plan's readiness
// strategy, healthCheckExprs included, until the action's timeout from
// now; whatever the action's own wait is, since an order without
// readiness means nothing.
func withOrdering(ctx context.Context, cfg *helmaction.Configuration, c Call, charts sequencing.Charts) (*helmaction.Configuration, error) {
	p := c.Plan
	opts := sequencing.Options{
		Charts:      charts,
		Strategy:    p.Wait.Readiness,
		WaitOptions: waitOptions(p),
		WaitForJobs: p.Wait.WaitForJobs,
		Deadline:    time.Now().Add(p.Wait.Timeout),
		Context:     ctx,
		// The HIP's readiness timeout never outlasts the action's.
		ReadinessTimeout: min(p.Ordering.ReadinessTimeout, p.Wait.Timeout),
	}
	if c.Observer != nil {
		opts.Observer, opts.Warn, opts.Planned = c.Observer.Sequence, c.Observer.SequenceWarning, c.Observer.SequencePlanned
	}
	kc := sequencing.Wrap(cfg.KubeClient, opts)
	if p.Ordering.Manifest != "" {
		if err := kc.Learn(p.Ordering.Manifest); err != nil {
			return nil, fmt.Errorf("reading the release manifest for its order: %w", err)
		}
	}
	return withKubeClient(cfg, kc), nil
}
