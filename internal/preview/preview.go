package preview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/redact"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Helm is the read-only side of the runner (internal/runner) a preview
// asks: the stored releases, the plans of its actions, Helm's dry run and
// the hook cleanup's judgement.
type Helm interface {
	LastRelease(ctx context.Context) (*releasev1.Release, error)
	Revision(version int) (*releasev1.Release, error)
	Plan(v plan.Verb) (plan.Plan, error)
	DryRun(ctx context.Context, v plan.Verb, chart *chartv2.Chart, values map[string]any) (action.Rendered, error)
	HookLeftovers() (deleted, left []string, err error)
	// DetectRefused compares the objects of rel's manifest with the
	// cluster by a server-side apply dry run, and returns those the API
	// server refuses to change in place, as a recreate works on them.
	DetectRefused(ctx context.Context, rel *releasev1.Release) (jsondiff.DiffSet, []recreate.Refused, error)
}

// Input is what a preview works on: what a reconcile would be given.
type Input struct {
	Object *v2.HelmRelease
	// Chart is the desired chart; a dry run may change it (Helm drops
	// disabled subcharts), so it is the preview's own copy.
	Chart *chartv2.Chart
	// Values are the composed values (spec.values with spec.valuesFrom).
	Values map[string]any
	// Secrets are the values read from Secrets, kept out of the output.
	Secrets *redact.Secrets
	// DefaultToRetryOnFailure is the controller's feature gate.
	DefaultToRetryOnFailure bool
	Helm                    Helm
	// Lookup tells whether a Secret or ConfigMap the pods need exists;
	// nil skips the warning about a wait that cannot end.
	Lookup Lookup
	// Previous reaches the release the status records when the spec has
	// moved the release elsewhere (reconcile.TargetChanged): the
	// controller uninstalls that one first. Nil: the release stays where
	// Helm reaches.
	Previous Helm
}

// Preview is what the next reconcile would do.
type Preview struct {
	// Release is the Helm release, "namespace/name".
	Release string          `json:"release"`
	State   reconcile.State `json:"state"`
	Step    reconcile.Step  `json:"step"`
	// Reason says why, in the state machine's words.
	Reason string      `json:"reason"`
	Chart  ChartChange `json:"chart"`
	// ValuesChanged are the values keys that differ from the stored
	// release's.
	ValuesChanged []string `json:"valuesChanged,omitempty"`
	// Actions are the Helm actions of the step, in order: two for a
	// reinstall (uninstall, install), none for a step without one.
	Actions []Action `json:"actions,omitempty"`
	// NotShown is what the preview does not predict.
	NotShown []string `json:"notShown"`
	// Settings are the controller settings the prediction was made with;
	// nil when the controller plans itself (its own settings, nothing to
	// say).
	Settings *Settings `json:"settings,omitempty"`
}

// Settings are the controller's settings a plan predicted with and where
// each was found. `helm-controller plan` reads and decides them; the
// preview only shows them.
type Settings struct {
	// Controller is the Deployment whose arguments were read,
	// "namespace/name".
	Controller string `json:"controller"`
	// Used are the settings that change a prediction, each with its
	// value and origin.
	Used []Setting `json:"used"`
	// FeatureGates is the state of every gate the controller accepts.
	FeatureGates map[string]bool `json:"featureGates"`
	// Notes say what could not be read, and what was used instead.
	Notes []string `json:"notes,omitempty"`
}

// Setting is one setting: a gate or a flag, its value, and where it came
// from (the Deployment, a flag of the plan, or the default).
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	From  string `json:"from"`
}

// ChartChange is the chart before (the stored release's) and after.
type ChartChange struct {
	From string `json:"from,omitempty"`
	To   string `json:"to"`
	// Source says where the planned chart came from.
	Source string `json:"source,omitempty"`
}

// Changes tells whether the next reconcile would do anything.
func (p *Preview) Changes() bool { return p.Step != reconcile.StepNone }

// Compute previews the next reconcile of in.Object.
func Compute(ctx context.Context, in Input) (*Preview, error) {
	cur, err := lastRelease(ctx, in.Helm)
	if err != nil {
		return nil, err
	}
	// The release a moved HelmRelease uninstalls is read where the status
	// records it; the new target holds nothing of it.
	prev := cur
	if in.Previous != nil {
		if prev, err = lastRelease(ctx, in.Previous); err != nil {
			return nil, err
		}
	}
	next := predict(in, cur, prev)
	if next.State == StateTargetChanged {
		cur = prev
	}
	p := &Preview{
		Release: in.Object.GetReleaseNamespace() + "/" + v2.ReleaseName(in.Object),
		State:   next.State, Step: next.Step, Reason: in.Secrets.String(joinReason(next)),
		Chart:    ChartChange{To: chartID(in.Chart.Metadata)},
		NotShown: slices.Clone(notShown),
	}
	if cur != nil && cur.Chart != nil {
		p.Chart.From = chartID(cur.Chart.Metadata)
	}
	if cur != nil {
		p.ValuesChanged = changedKeys(cur.Config, in.Values, in.Secrets)
	}
	if p.Actions, err = actionsOf(ctx, in, next, cur); err != nil {
		return nil, errors.New(in.Secrets.String(err.Error()))
	}
	for _, a := range p.Actions {
		if len(a.RenderedWithoutServer) > 0 {
			p.NotShown = append(p.NotShown, fmt.Sprintf("the %s applies the chart's CRDs of %s before it renders; the preview "+
				"cannot, so it rendered without the API server (lookups found nothing, no server-side dry run) "+
				"and did not compare objects of those kinds with the cluster", a.Verb, strings.Join(a.RenderedWithoutServer, ", ")))
		}
	}
	return p, nil
}

// lastRelease is the newest revision helm reaches, nil when there is none.
func lastRelease(ctx context.Context, helm Helm) (*releasev1.Release, error) {
	cur, err := helm.LastRelease(ctx)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Helm storage: %w", err)
	}
	return cur, nil
}

// notShown is what no preview predicts yet.
var notShown = []string{
	"drift detection and correction (spec.driftDetection)",
	"objects the hooks create besides the hooks themselves",
}

// predict is the state machine's prediction, with what the controller
// decides before the state machine runs: a deleted HelmRelease is
// uninstalled, a suspended one left alone, and a release whose chart was
// renamed (or whose target moved) uninstalled before it is installed.
// prev is the release the status records (cur unless the target moved).
func predict(in Input, cur, prev *releasev1.Release) reconcile.Next {
	deleted := !in.Object.DeletionTimestamp.IsZero()
	switch {
	case deleted && cur != nil && !in.Object.Spec.Suspend:
		return controllerStep(StateDeleted, "the HelmRelease is being deleted", reconcile.StepUninstall)
	case deleted:
		return controllerStep(StateDeleted, "the HelmRelease is being deleted; nothing to uninstall", reconcile.StepNone)
	case in.Object.Spec.Suspend:
		return controllerStep(StateSuspended, "the HelmRelease is suspended", reconcile.StepNone)
	}
	if reason := reconcile.TargetChanged(in.Object, in.Chart.Metadata.Name); reason != "" && prev != nil {
		return controllerStep(StateTargetChanged, reason, reconcile.StepReinstall)
	}
	req := &reconcile.Request{
		Object:                  in.Object,
		ReleaseName:             v2.ReleaseName(in.Object),
		Chart:                   chart{in.Chart},
		Values:                  in.Values,
		ConfigDigest:            chartutil.DigestValues(digest.Canonical, in.Values).String(),
		DefaultToRetryOnFailure: in.DefaultToRetryOnFailure,
	}
	return reconcile.Predict(req, cur)
}

// States the controller decides on before the state machine runs.
const (
	StateDeleted       reconcile.State = "Deleted"
	StateSuspended     reconcile.State = "Suspended"
	StateTargetChanged reconcile.State = "TargetChanged"
)

func controllerStep(state reconcile.State, reason string, step reconcile.Step) reconcile.Next {
	return reconcile.Next{Observation: reconcile.Observation{State: state, Reason: reason}, Step: step}
}

func joinReason(n reconcile.Next) string {
	if n.Why == "" {
		return n.Reason
	}
	return n.Reason + "; " + n.Why
}

func chartID(md *chartv2.Metadata) string {
	if md == nil {
		return ""
	}
	return md.Name + "@" + md.Version
}

// chart is the desired chart as the state machine reads it.
type chart struct{ c *chartv2.Chart }

func (c chart) Metadata() *chartv2.Metadata   { return c.c.Metadata }
func (c chart) Load() (*chartv2.Chart, error) { return c.c, nil }

// orderOf is the order an ordered action applies (or deletes) manifest
// in, or nil when it is not ordered.
func orderOf(p plan.Plan, chrt *chartv2.Chart, manifest string) (*sequencing.Plan, error) {
	if !p.Ordering.Ordered() {
		return nil, nil
	}
	charts := p.Ordering.Charts
	if p.Ordering.From == plan.FromSpec {
		var err error
		if charts, err = sequencing.ChartsOf(chrt); err != nil {
			return nil, err
		}
	}
	resources, err := sequencing.ParseManifest(manifest)
	if err != nil {
		return nil, err
	}
	return sequencing.NewPlan(resources, charts)
}
