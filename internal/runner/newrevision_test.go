package runner

import (
	"context"
	"testing"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// fakeNewRevision is a new-revision watch that has seen trigger, or
// nothing when it is empty.
type fakeNewRevision struct {
	ctx     context.Context
	trigger string
}

func (f *fakeNewRevision) Context() context.Context { return f.ctx }
func (f *fakeNewRevision) Trigger() string          { return f.trigger }

// A remediation rollback that starts once a new revision was seen must not
// run with the wait context that sighting cancelled: it would fail at once.
func TestRollbackAfterNewRevisionIsNotBoundToItsCancelledWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	seen := &fakeNewRevision{ctx: ctx, trigger: "HelmRelease/apps/web"}
	h := newRunner(memoryConfig(), &v2.HelmRelease{}, Settings{NewRevision: seen})
	p, err := h.rollbackPlan(0)
	if err != nil {
		t.Fatal(err)
	}
	if p.WaitContext != nil {
		t.Error("the rollback's waits are bound to the cancelled new-revision context")
	}
	// Before any new revision, the rollback's wait can still be abandoned.
	seen.trigger = ""
	if p, _ := h.rollbackPlan(0); p.WaitContext == nil {
		t.Error("a rollback before any new revision is not bound to the watch")
	}
}
