package action

import (
	"context"

	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/afterhooks"
)

// ResumeWait finishes the afterHooks readiness wait of pending, the latest
// revision of obj's release, which an earlier run of the controller left
// pending; see afterhooks.Resume. The wait and cleanup are those of the
// action that created the revision.
func ResumeWait(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, pending *releasev1.Release, o Options) (*releasev1.Release, error) {
	if obj == nil {
		return nil, errNilObject
	}
	v := verbInstall
	if pending != nil && pending.Info != nil {
		switch pending.Info.Status {
		case common.StatusPendingUpgrade:
			v = verbUpgrade
		case common.StatusPendingRollback:
			v = verbRollback
		}
	}
	return afterhooks.Resume(ctx, cfg, afterHooksAction(obj, v, o))
}

// afterHooksAction describes the afterHooks run of obj's action v.
func afterHooksAction(obj *v2.HelmRelease, v verb, o Options) afterhooks.Action {
	var wait Wait
	cleanup := false
	switch v {
	case verbInstall:
		wait = InstallWait(obj, o)
	case verbUpgrade:
		wait = UpgradeWait(obj, o)
		cleanup = obj.GetUpgrade().CleanupOnFail
	case verbRollback:
		wait = RollbackWait(obj, o)
		cleanup = obj.GetRollback().CleanupOnFail
	}
	return afterhooks.Action{
		Verb:          string(v),
		Release:       ReleaseName(obj),
		Readiness:     afterhooks.Readiness{Strategy: wait.Strategy, WaitForJobs: wait.WaitForJobs, Timeout: wait.Timeout},
		CleanupOnFail: cleanup,
		StatusReaders: o.StatusReaders,
		Abandon:       o.WaitContext,
		Observer:      o.AfterHooksObserver,
	}
}
