package preview_test

import (
	"fmt"
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
)

// planTimeLimit is how long a plan of a 50-object chart may take (issue
// 33), on the test API server.
const planTimeLimit = 5 * time.Second

// A plan of an upgrade of a chart of 50 objects (ConfigMaps and
// Services, every one changed) returns within planTimeLimit.
func TestPlanOfFiftyObjectsIsQuick(t *testing.T) {
	e := newEnv(t, nil)
	fifty := func() *chartv2.Chart {
		var templates []string
		for i := range 25 {
			templates = append(templates, configMap(fmt.Sprintf("cm-%d", i)),
				fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%d\n  labels:\n    a: {{ .Values.data.a | quote }}\n"+
					"spec:\n  ports:\n  - port: 80\n", i))
		}
		return testChart("1.0.0", templates...)
	}
	obj := e.hr(noWait)
	e.reconcile(obj, fifty, values("a", "1"))

	start := time.Now()
	pv := e.preview(obj, fifty(), values("a", "2"))
	took := time.Since(start)
	if n := len(pv.Actions[0].Objects.Update); n != 50 {
		t.Fatalf("%d objects to update, want 50", n)
	}
	t.Logf("plan of an upgrade of 50 objects: %s", took)
	if took > planTimeLimit {
		t.Errorf("the plan took %s, more than %s", took, planTimeLimit)
	}
}
