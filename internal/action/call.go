package action

import (
	"helm.sh/helm/v4/pkg/postrenderer"

	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Config is what the controller decides once for every action: feature
// gate effects, built in main.go.
type Config struct {
	// UseHelm3Defaults is the UseHelm3Defaults feature gate: Helm 3's
	// defaults where the spec leaves the choice open. As with
	// RecreateImmutable, the runner decides with it (plan.Settings,
	// into each plan) and the action never reads it: see the package doc.
	UseHelm3Defaults bool

	// AllowDNSLookups lets templates resolve host names (the
	// AllowDNSLookups feature gate).
	AllowDNSLookups bool

	// RecreateImmutable is the RecreateImmutableResources feature gate:
	// objects of the built-in kinds it covers may be recreated when the
	// API server refuses to update them in place, without the
	// helm.toolkit.fluxcd.io/force: enabled annotation (see
	// internal/recreate). The runner puts it in each release's recreate
	// policy.
	RecreateImmutable bool
}

// Call is one action as the runner hands it over: the controller's
// settings, what the runner decided for this action, and who hears what
// the action does.
type Call struct {
	Config Config
	Plan   plan.Plan
	// Observer may be nil.
	Observer Observer
	// Mark, when set, labels the revision an install, upgrade or
	// rollback creates as the controller's own (see
	// internal/ownrevision); nil for the other actions.
	Mark *ownrevision.Mark
}

// Observer hears what an action does, for events, progress conditions and
// metrics. Its methods may be called from Helm's goroutines.
type Observer interface {
	// The phases of an afterHooks action.
	afterhooks.Observer
	// Sequence hears each batch of an ordered action start, wait and end;
	// SequenceWarning each misconfiguration of the chart's ordering
	// annotations; SequencePlanned the plan of each ordered apply or
	// deletion before it starts.
	Sequence(sequencing.Progress)
	SequenceWarning(string)
	SequencePlanned(sequencing.Planned)
	// Recreated hears each object an action recreated.
	Recreated(recreate.Recreated)
	// HookResources hears what an uninstall with
	// spec.uninstall.deleteHookResources deleted ("Kind/namespace/name")
	// and what it found under the names of the release's hooks and left,
	// each followed by the reason in parentheses; called when either is
	// not empty, even if some deletions failed.
	HookResources(deleted, left []string)
}

// withPostRenderer is c with the post renderer pr.
func withPostRenderer(c Call, pr postrenderer.PostRenderer) Call {
	c.Plan.PostRenderer = pr
	return c
}
