package action

import (
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"

	"github.com/afterhooks/helm-controller/internal/plan"
)

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

// postRenderStrategy maps the post-render strategy the plan decided to
// Helm's.
func postRenderStrategy(p plan.Plan) (helmaction.PostRenderStrategy, error) {
	switch s := p.PostRenderStrategy; s {
	case helmv2.PostRenderStrategyCombined:
		return helmaction.PostRenderStrategyCombined, nil
	case helmv2.PostRenderStrategySeparate:
		return helmaction.PostRenderStrategySeparate, nil
	case helmv2.PostRenderStrategyNoHooks:
		return helmaction.PostRenderStrategyNoHooks, nil
	case "":
		// Defaulting here would be a second decision.
		return "", fmt.Errorf("%s: the plan decides no postRenderStrategy", p.Verb)
	default:
		return "", fmt.Errorf("unknown postRenderStrategy %q", s)
	}
}

// applyFlags maps the serverSideApply mode and force of spec.upgrade or
// spec.rollback to Helm's ServerSideApply, ForceConflicts and ForceReplace.
// Helm is handed the mode itself ("auto" stays "auto": Helm resolves it);
// the force flags follow the plan's Apply, which resolved the mode as Helm
// will, or Helm would reject the pair.
func applyFlags(mode helmv2.ServerSideApplyMode, force bool, p plan.Plan) (serverSideApply string, forceConflicts, forceReplace bool, err error) {
	serverSideApply, err = ssaMode(mode)
	if err != nil {
		return "", false, false, err
	}
	apply, err := plannedApply(p)
	if err != nil {
		return "", false, false, err
	}
	forceConflicts, forceReplace = forceFlags(apply.ServerSide, force)
	return serverSideApply, forceConflicts, forceReplace, nil
}

// plannedApply is the plan's Apply; an install, upgrade or rollback planned
// without one is refused rather than given a default here.
func plannedApply(p plan.Plan) (plan.Apply, error) {
	if p.Apply == nil {
		return plan.Apply{}, fmt.Errorf("%s: the plan decides no apply method", p.Verb)
	}
	return *p.Apply, nil
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
