package action

import (
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// withRecreate returns a copy of cfg whose updates (those of an upgrade,
// a rollback, or an install adopting existing objects) recreate the objects
// the API server refuses to change in place, as internal/recreate allows:
// annotated ones, or all (but those opting out) when force is set or the
// RecreateImmutableResources gate is on. forceField names the force
// setting for the advice of a refusal. It wraps the configuration's own
// client, before afterHooks or sequencing wrap it, so every apply of the
// action goes through it.
func withRecreate(cfg *helmaction.Configuration, force bool, forceField string, timeout time.Duration, o Options) *helmaction.Configuration {
	kc := recreate.Wrap(cfg.KubeClient, recreate.Options{
		Policy:   recreate.Policy{All: force || o.RecreateImmutable, Setting: forceField},
		Timeout:  timeout,
		Observer: o.RecreateObserver,
		// The inner client strips what the API server would refuse
		// before it applies; the dry run must see the same object.
		Prepare: func(obj runtime.Object) { sequencing.StripUnappliable(obj) },
	})
	return withKubeClient(cfg, kc)
}
