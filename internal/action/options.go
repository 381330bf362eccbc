package action

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// Config is what the controller decides once for every action: feature
// gate effects, built in main.go.
type Config struct {
	// UseHelm3Defaults applies Helm 3's defaults where the spec leaves the
	// choice open (the UseHelm3Defaults feature gate); see the package doc.
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

// maxReleaseNameLength is Helm's limit for release names.
const maxReleaseNameLength = 53

// ReleaseName returns the Helm release name of obj: spec.releaseName, or
// '[targetNamespace-]name', shortened when longer than Helm allows.
func ReleaseName(obj *v2.HelmRelease) string {
	return shortenReleaseName(obj.GetReleaseName())
}

// shortenReleaseName keeps names of up to 53 characters. Longer ones become
// their first 40 characters, a dash and the first 12 hex characters of the
// SHA-256 of the whole name: 53 characters, stable, and unlikely to collide.
func shortenReleaseName(name string) string {
	if len(name) <= maxReleaseNameLength {
		return name
	}
	const hashLen = 12
	sum := sha256.Sum256([]byte(name))
	return name[:maxReleaseNameLength-hashLen-1] + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// waitOptions passes the plan's WaitContext and StatusReaders to Helm's
// waiters.
func waitOptions(p plan.Plan) []kube.WaitOption {
	var opts []kube.WaitOption
	if p.WaitContext != nil {
		opts = append(opts, kube.WithWaitMethodContext(p.WaitContext), kube.WithWaitWithJobsMethodContext(p.WaitContext))
	}
	if len(p.StatusReaders) > 0 {
		opts = append(opts, kube.WithKStatusReaders(p.StatusReaders...))
	}
	return opts
}

// postRenderStrategy maps spec.postRenderStrategy.
func postRenderStrategy(obj *v2.HelmRelease, c Config) (helmaction.PostRenderStrategy, error) {
	switch s := obj.GetPostRenderStrategy(); s {
	case helmv2.PostRenderStrategyCombined:
		return helmaction.PostRenderStrategyCombined, nil
	case helmv2.PostRenderStrategySeparate:
		return helmaction.PostRenderStrategySeparate, nil
	case helmv2.PostRenderStrategyNoHooks:
		return helmaction.PostRenderStrategyNoHooks, nil
	case "":
		if c.UseHelm3Defaults {
			return helmaction.PostRenderStrategyNoHooks, nil
		}
		return helmaction.PostRenderStrategyCombined, nil
	default:
		return "", fmt.Errorf("unknown postRenderStrategy %q", s)
	}
}

// ssaMode maps an upgrade or rollback serverSideApply mode to Helm's string.
func ssaMode(m helmv2.ServerSideApplyMode) (string, error) {
	switch m {
	case helmv2.ServerSideApplyEnabled:
		return "true", nil
	case helmv2.ServerSideApplyDisabled:
		return "false", nil
	case helmv2.ServerSideApplyAuto, "":
		return "auto", nil
	default:
		return "", fmt.Errorf("unknown serverSideApply mode %q", m)
	}
}

// resolveSSA tells what Helm will do for a "true"/"false"/"auto" setting
// given the apply method stored on the release it decides "auto" from.
func resolveSSA(mode, storedApplyMethod string) bool {
	switch mode {
	case "true":
		return true
	case "false":
		return false
	default:
		return storedApplyMethod == string(releasev1.ApplyMethodServerSideApply)
	}
}

// forceFlags returns Helm's ForceConflicts and ForceReplace for an apply:
// server-side apply always forces conflicts and cannot replace; client-side
// apply replaces objects when force is set. Helm rejects any other pair.
func forceFlags(serverSide, force bool) (forceConflicts, forceReplace bool) {
	if serverSide {
		return true, false
	}
	return false, force
}

// errNilObject guards the exported functions.
var errNilObject = errors.New("action: nil HelmRelease")

// withPostRenderer is c with the post renderer pr.
func withPostRenderer(c Call, pr postrenderer.PostRenderer) Call {
	c.Plan.PostRenderer = pr
	return c
}
