package action

import (
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
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

// applyFlags maps the serverSideApply mode and force of spec.upgrade or
// spec.rollback to Helm's ServerSideApply, ForceConflicts and ForceReplace.
// storedApplyMethod is the apply method of the release Helm decides "auto"
// from ("ssa", "csa" or empty): the force flags must match what Helm will
// do, or Helm rejects the pair.
func applyFlags(mode helmv2.ServerSideApplyMode, force bool, storedApplyMethod string) (serverSideApply string, forceConflicts, forceReplace bool, err error) {
	serverSideApply, err = ssaMode(mode)
	if err != nil {
		return "", false, false, err
	}
	forceConflicts, forceReplace = forceFlags(resolveSSA(serverSideApply, storedApplyMethod), force)
	return serverSideApply, forceConflicts, forceReplace, nil
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
