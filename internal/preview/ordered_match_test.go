package preview_test

import (
	"strconv"
	"testing"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// The plan of an ordered install, then the install: the objects created,
// the batches the install reports (status.sequence) in the plan's order
// with the plan's resources, and the objects of each batch created after
// those of the batches before it (by the API server's resourceVersion,
// etcd's revision at their creation).
func TestPlanOfAnOrderedInstallMatchesWhatHappens(t *testing.T) {
	e := newEnv(t, nil)
	obj := e.hr(func(o *v2.HelmRelease) { o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered} })
	pv := e.preview(obj, orderedChart(), values("a", "1"))
	if len(pv.Actions) != 1 || pv.Actions[0].Order == nil {
		t.Fatalf("actions %+v, want one ordered install", pv.Actions)
	}
	planned := pv.Actions[0]

	e.reconcile(obj, orderedChart, values("a", "1"))
	after := e.configMaps()
	e.compareObjects(planned.Objects, map[string]string{}, after)

	seq := obj.Status.Sequence
	if seq == nil || len(seq.Batches) != len(planned.Order.Batches) {
		t.Fatalf("status.sequence %+v, the plan has %d batches", seq, len(planned.Order.Batches))
	}
	lastOfBefore := int64(0)
	for i, b := range planned.Order.Batches {
		got := seq.Batches[i]
		if got.Name != b.Name || got.Resources != len(b.Resources) {
			t.Errorf("batch %d: the install reports %s (%d objects), the plan says %s (%d objects)", i+1, got.Name, got.Resources, b.Name, len(b.Resources))
		}
		first, last := int64(-1), int64(0)
		for _, r := range b.Resources {
			rv, err := strconv.ParseInt(after[r.Name], 10, 64)
			if err != nil {
				t.Fatalf("resourceVersion of %s: %v", r.Name, err)
			}
			first, last = minFirst(first, rv), max(last, rv)
		}
		if first < lastOfBefore {
			t.Errorf("batch %d (%s) was created before the batches the plan puts before it had been", i+1, b.Name)
		}
		lastOfBefore = last
	}
}

func minFirst(cur, v int64) int64 {
	if cur < 0 || v < cur {
		return v
	}
	return cur
}
