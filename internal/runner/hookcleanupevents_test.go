package runner

import (
	"errors"
	"fmt"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/afterhooks/helm-controller/internal/action"
)

// A failed hook cleanup is a Warning event, not a failed uninstall: the
// release is gone. Any other error stays the uninstall's.
func TestHookCleanupFailed(t *testing.T) {
	helmErr := errors.New("failed to delete release: web")
	recordsErr := errors.New("uninstall: deleting the records of release web: connection refused")
	cleanupErr := &action.HookCleanupError{Release: "web", Err: errors.New("deleting Job/apps/web-migrate: forbidden")}
	cases := []struct {
		name      string
		err       error
		wantErr   error
		wantEvent *capturedEvent
	}{
		{name: "success", err: nil},
		{name: "helm failure", err: helmErr, wantErr: helmErr},
		{name: "cleanup failure", err: fmt.Errorf("wrapped: %w", cleanupErr), wantEvent: &capturedEvent{
			corev1.EventTypeWarning, HookCleanupFailedReason,
			"release web uninstalled, but deleting the objects its hooks left failed: deleting Job/apps/web-migrate: forbidden",
			helmv2.ActionHelmUninstall.String(),
		}},
		// The records could not be ended either: the uninstall is not
		// done, and that failure is not the cleanup's to hide.
		{name: "records and cleanup failure", err: errors.Join(recordsErr, cleanupErr), wantErr: recordsErr, wantEvent: &capturedEvent{
			corev1.EventTypeWarning, HookCleanupFailedReason,
			"release web uninstalled, but deleting the objects its hooks left failed: deleting Job/apps/web-migrate: forbidden",
			helmv2.ActionHelmUninstall.String(),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &captureRecorder{}
			h := newRunner(nil, testRelease(), Settings{Recorder: rec})
			if err := h.hookCleanupFailed(tc.err); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
			switch {
			case tc.wantEvent == nil && len(rec.events) > 0:
				t.Errorf("events %+v, want none", rec.events)
			case tc.wantEvent != nil && (len(rec.events) != 1 || rec.events[0] != *tc.wantEvent):
				t.Errorf("events %+v, want %+v", rec.events, *tc.wantEvent)
			}
		})
	}
}

func TestHookResourcesDeletedEvent(t *testing.T) {
	rec := &captureRecorder{}
	h := newRunner(nil, testRelease(), Settings{Recorder: rec})
	h.hookResourcesDeleted([]string{"Job/apps/a", "ConfigMap/apps/b", "ConfigMap/apps/c", "ConfigMap/apps/d", "ConfigMap/apps/e", "ConfigMap/apps/f"})
	if len(rec.events) != 1 {
		t.Fatalf("events %+v, want one", rec.events)
	}
	e := rec.events[0]
	want := "Deleted 6 object(s) left by the hooks of release web: Job/apps/a, ConfigMap/apps/b, ConfigMap/apps/c, ConfigMap/apps/d, ConfigMap/apps/e and 1 more"
	if e.eventtype != corev1.EventTypeNormal || e.reason != HookResourcesDeletedReason || e.message != want || e.action != helmv2.ActionHelmUninstall.String() {
		t.Errorf("event %+v, want Normal %s %q", e, HookResourcesDeletedReason, want)
	}
	// A runner without a recorder (tests, tools) reports nothing and goes on.
	newRunner(nil, h.obj, Settings{}).hookResourcesDeleted([]string{"Job/apps/a"})
}

func TestHookResourcesLeftEvent(t *testing.T) {
	rec := &captureRecorder{}
	h := newRunner(nil, testRelease(), Settings{Recorder: rec})
	h.hookResourcesLeft([]string{"ConfigMap/apps/web-keep (helm.sh/resource-policy: keep)", "Namespace/web-data (a Namespace is never deleted)"})
	if len(rec.events) != 1 {
		t.Fatalf("events %+v, want one", rec.events)
	}
	e := rec.events[0]
	want := "Left 2 object(s) found under the names of the hooks of release web: ConfigMap/apps/web-keep (helm.sh/resource-policy: keep), Namespace/web-data (a Namespace is never deleted)"
	if e.eventtype != corev1.EventTypeNormal || e.reason != HookResourcesLeftReason || e.message != want {
		t.Errorf("event %+v, want Normal %s %q", e, HookResourcesLeftReason, want)
	}
}
