package controller

import (
	"math/rand"
	"testing"
	"time"

	"github.com/fluxcd/pkg/runtime/jitter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// A successful reconcile requeues after spec.interval spread by
// --interval-jitter-percentage, as upstream does.
func TestSuccessRequeueIsJittered(t *testing.T) {
	// main sets the process-wide jitter from the flag once; so does this.
	jitter.SetGlobalIntervalJitter(0.1, rand.New(rand.NewSource(1)))

	const interval = 10 * time.Minute
	obj := &v2.HelmRelease{}
	obj.Spec.Interval = metav1.Duration{Duration: interval}
	r := &HelmReleaseReconciler{}
	seen := map[time.Duration]bool{}
	for range 100 {
		res, err := r.outcome(obj, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter < interval*9/10 || res.RequeueAfter > interval*11/10 {
			t.Fatalf("requeue after %s, want %s ±10%%", res.RequeueAfter, interval)
		}
		seen[res.RequeueAfter] = true
	}
	if len(seen) < 10 {
		t.Errorf("only %d distinct requeue intervals in 100 reconciles: no jitter applied", len(seen))
	}
}
