package runner

import (
	"context"
	"errors"
	"time"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/afterhooks/helm-controller/internal/afterhooks"
	"github.com/afterhooks/helm-controller/internal/kubewait"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/scheme"
	"github.com/afterhooks/helm-controller/internal/waitcause"
)

// explainTimeout bounds the reads that explain a failed wait: they delay
// the failure's condition and event.
const explainTimeout = 15 * time.Second

// explainWait adds to err, the error of the action p planned, why the
// workloads its failed readiness wait named are not ready (see
// internal/waitcause), last in the wait's parentheses, so the Ready and
// Released conditions and the failure event still start with upstream's
// words. rel is the revision the action wrote (the newest written when
// nil): its manifest and its post hooks that have not run tell a pod
// waiting for a post hook. An error without a failed wait, or a wait of
// nothing this can explain, comes back unchanged; so does every error
// when the cluster cannot be read: the explanation helps, it never fails
// anything.
func (r *Runner) explainWait(ctx context.Context, p plan.Plan, rel *releasev1.Release, err error) error {
	named := notReadyIn(err)
	if len(named) == 0 || r.getter == nil {
		return err
	}
	reader, cerr := r.causeReader()
	if cerr != nil {
		return err
	}
	if rel == nil {
		rel = r.writes.Last()
	}
	ctx, cancel := context.WithTimeout(ctx, explainTimeout)
	defer cancel()
	post, disabled := r.postHooks(p.Verb)
	return kubewait.Explain(err, waitcause.Find(ctx, reader, named, waitcause.ReleaseOf(rel, post, disabled)))
}

// notReadyIn is what the failed wait in err named: afterHooks' own list
// (which it also finds for Helm's legacy waiter), else the list of a
// failed wait of Helm's action or of the ordering.
func notReadyIn(err error) []kubewait.NotReady {
	if nre := (*afterhooks.NotReadyError)(nil); errors.As(err, &nre) && len(nre.Resources) > 0 {
		return nre.Resources
	}
	return kubewait.NotReadyIn(err)
}

// postHooks is the event of the post hooks of verb, and whether the
// action disables hooks (they then never run).
func (r *Runner) postHooks(v plan.Verb) (releasev1.HookEvent, bool) {
	switch v {
	case plan.Upgrade:
		return releasev1.HookPostUpgrade, r.obj.GetUpgrade().DisableHooks
	case plan.Rollback:
		return releasev1.HookPostRollback, r.obj.GetRollback().DisableHooks
	default:
		return releasev1.HookPostInstall, r.obj.GetInstall().DisableHooks
	}
}

// causeReader reads the target cluster as the release's identity, the
// one Helm applied and waited with, built only once a wait failed.
func (r *Runner) causeReader() (client.Reader, error) {
	cfg, err := r.getter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	mapper, err := r.getter.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme.New(), Mapper: mapper})
}
