package preview_test

import (
	"context"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// The plan of the uninstall of a deleted HelmRelease, then the uninstall
// the controller runs for it: the objects deleted and kept, and the hook
// leftovers deleteHookResources deletes, are those the plan named.
func TestPlanOfAnUninstallMatchesWhatHappens(t *testing.T) {
	e := newEnv(t, nil)
	obj := e.hr(func(o *v2.HelmRelease) {
		o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true, DeleteHookResourceKinds: []string{"ConfigMap"}}
	})
	e.reconcile(obj, chartV1, values("a", "1"))
	before, hooksBefore := e.configMaps(), e.hookConfigMaps()

	obj.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pv := e.preview(obj, chartV1(), values("a", "1"))
	if pv.Step != reconcile.StepUninstall || len(pv.Actions) != 1 || pv.Actions[0].HookLeftovers == nil {
		t.Fatalf("step %s, actions %+v: want one uninstall with hook leftovers", pv.Step, pv.Actions)
	}
	planned := pv.Actions[0]

	if err := e.runner(obj).Uninstall(context.Background()); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	e.compareObjects(planned.Objects, before, e.configMaps())

	var deleted []string
	hooksAfter := e.hookConfigMaps()
	for name := range hooksBefore {
		if _, ok := hooksAfter[name]; !ok {
			deleted = append(deleted, "ConfigMap/"+e.ns+"/"+name)
		}
	}
	sort.Strings(deleted)
	planDeleted := append([]string(nil), planned.HookLeftovers.Delete...)
	sort.Strings(planDeleted)
	eq(t, "hook leftovers deleted (plan vs cluster)", planDeleted, deleted)
}
