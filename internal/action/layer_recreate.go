package action

import (
	"context"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// withRecreate returns a copy of cfg whose updates (those of an upgrade,
// a rollback, or an install adopting existing objects) recreate the objects
// the API server refuses to change in place, as the plan's recreate policy
// (internal/recreate) allows: annotated ones, or the kinds the
// RecreateImmutableResources gate covers. An action's force setting is
// Helm's and plays no part. Each recreate ends with ctx and by the
// action's deadline (its timeout from now). A plan without a policy
// leaves cfg as it is.
func withRecreate(ctx context.Context, cfg *helmaction.Configuration, c Call) *helmaction.Configuration {
	policy := c.Plan.RecreatePolicy()
	if policy == nil {
		return cfg
	}
	opts := recreate.Options{
		Policy:     *policy,
		Context:    ctx,
		Deadline:   time.Now().Add(c.Plan.Wait.Timeout),
		Dependents: recreate.NewDependents(cfg.RESTClientGetter),
		// The inner client strips what the API server would refuse
		// before it applies; the dry run must see the same object.
		Prepare: func(obj runtime.Object) { helmclient.StripUnappliable(obj) },
	}
	if c.Observer != nil {
		opts.Observer = c.Observer.Recreated
	}
	return withKubeClient(cfg, recreate.Wrap(cfg.KubeClient, opts))
}
