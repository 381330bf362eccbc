package action

import (
	"context"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"k8s.io/apimachinery/pkg/runtime"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// withRecreate returns a copy of cfg whose updates (those of an upgrade,
// a rollback, or an install adopting existing objects) recreate the objects
// the API server refuses to change in place, as internal/recreate allows:
// annotated ones, or the kinds the RecreateImmutableResources gate covers.
// An action's force setting is Helm's and plays no part. Each recreate
// ends with ctx and by the action's deadline (timeout from now).
func withRecreate(ctx context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, timeout time.Duration, o Options) *helmaction.Configuration {
	kc := recreate.Wrap(cfg.KubeClient, recreate.Options{
		Policy: recreate.Policy{
			Gate:           o.RecreateImmutable,
			Release:        recreate.Release{Name: ReleaseName(obj), Namespace: obj.GetReleaseNamespace()},
			RolledBackFrom: o.RecreateRolledBackFrom,
		},
		Context:    ctx,
		Deadline:   time.Now().Add(timeout),
		Dependents: recreate.NewDependents(cfg.RESTClientGetter),
		Observer:   o.RecreateObserver,
		// The inner client strips what the API server would refuse
		// before it applies; the dry run must see the same object.
		Prepare: func(obj runtime.Object) { helmclient.StripUnappliable(obj) },
	})
	return withKubeClient(cfg, kc)
}
