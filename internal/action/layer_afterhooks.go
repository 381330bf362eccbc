package action

import (
	"context"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	"github.com/afterhooks/helm-controller/internal/afterhooks"
)

// finishFunc ends an action with what Helm's action returned.
type finishFunc func(*releasev1.Release, error) (*releasev1.Release, error)

// withAfterHooks returns the configuration an install, upgrade or rollback
// whose hook order is afterHooks runs Helm's action on (see
// afterhooks.Start), and finish, which runs the readiness wait after the
// post hooks; for any other plan cfg as it is and a finish that returns
// what Helm returned. The plan's Helm wait is then hookOnly.
func withAfterHooks(ctx context.Context, cfg *helmaction.Configuration, c Call) (*helmaction.Configuration, finishFunc, error) {
	if !c.Plan.AfterHooks() {
		return cfg, func(rel *releasev1.Release, err error) (*releasev1.Release, error) { return rel, err }, nil
	}
	a := afterHooksAction(c)
	return afterhooks.Start(ctx, cfg, a)
}

// ResumeWait finishes the afterHooks readiness wait of the latest revision
// of the plan's release, which an earlier run of the controller left
// pending; see afterhooks.Resume. The plan is that of the action that
// created the revision.
func ResumeWait(ctx context.Context, cfg *helmaction.Configuration, c Call) (*releasev1.Release, error) {
	a := afterHooksAction(c)
	return afterhooks.Resume(ctx, cfg, a)
}

// afterHooksAction describes the afterHooks run of c.
func afterHooksAction(c Call) afterhooks.Action {
	p := c.Plan
	return afterhooks.Action{
		Verb:          p.Verb,
		Release:       p.Release,
		Readiness:     afterhooks.Readiness{Strategy: p.Wait.Readiness, WaitForJobs: p.Wait.WaitForJobs, Timeout: p.Wait.Timeout},
		CleanupOnFail: p.CleanupOnFail,
		StatusReaders: p.StatusReaders,
		Abandon:       p.WaitContext,
		Observer:      c.Observer,
	}
}
