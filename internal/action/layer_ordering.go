package action

import (
	"context"
	"fmt"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// What the action layer hands to internal/sequencing
// (spec.waitStrategy.name ordered); stacked (stack.go) wraps the client:
// install and upgrade order the chart they apply and record that they
// did; rollback and uninstall follow what the revision they restore or
// remove recorded, whatever the HelmRelease says now.

// ordering is what a sequenced action needs besides its configuration.
type ordering struct {
	charts      sequencing.Charts
	timeout     time.Duration
	waitForJobs bool
	// learn is the manifest of the release an uninstall deletes: Helm
	// builds it without the source lines that name each object's chart.
	learn string
	// recorded is the chart an ordered install or upgrade applies: the
	// one asked for, with its record (see sequencing.Record).
	recorded *chartv2.Chart
}

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

// orderedApply is the ordering of a sequenced install or upgrade of chrt,
// which must be ready within timeout; see orderChart.
func orderedApply(chrt *chartv2.Chart, timeout time.Duration, waitForJobs bool) (*ordering, error) {
	recorded, charts, err := orderChart(chrt)
	if err != nil {
		return nil, err
	}
	return &ordering{charts: charts, timeout: timeout, waitForJobs: waitForJobs, recorded: recorded}, nil
}

// recordedOrdering reads whether rel was applied in order, and with which
// subchart facts.
func recordedOrdering(rel *releasev1.Release) (sequencing.Charts, bool, error) {
	if rel == nil || rel.Chart == nil {
		return nil, false, nil
	}
	charts, sequenced, err := sequencing.Recorded(rel.Chart.Metadata)
	if err != nil {
		return nil, sequenced, fmt.Errorf("release %s v%d: %w", rel.Name, rel.Version, err)
	}
	return charts, sequenced, nil
}

// withOrdering returns a copy of cfg whose kube client applies in order.
// Batches are waited for with the poller (or legacy, when the spec or the
// UseHelm3Defaults gate asks for it), healthCheckExprs included, until the
// action's timeout from now; whatever the action's own wait is, since an
// order without readiness means nothing.
func withOrdering(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, ord ordering, o Options) (*helmaction.Configuration, error) {
	kc := sequencing.Wrap(cfg.KubeClient, sequencing.Options{
		Charts:      ord.charts,
		Strategy:    readinessStrategy(obj, o),
		WaitOptions: waitOptions(o),
		WaitForJobs: ord.waitForJobs,
		Deadline:    time.Now().Add(ord.timeout),
		Context:     ctx,
		Observer:    o.SequenceObserver,
		Warn:        o.SequenceWarn,
		Planned:     o.SequencePlanned,
		// The HIP's readiness timeout never outlasts the action's.
		ReadinessTimeout: min(o.SequenceReadinessTimeout, ord.timeout),
	})
	if ord.learn != "" {
		if err := kc.Learn(ord.learn); err != nil {
			return nil, fmt.Errorf("reading the release manifest for its order: %w", err)
		}
	}
	return withKubeClient(cfg, kc), nil
}
