package runner

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type capturedEvent struct{ eventtype, reason, message, action string }

type captureRecorder struct{ events []capturedEvent }

func (c *captureRecorder) AnnotatedEventf(_, _ runtime.Object, _ map[string]string, eventtype, reason, action, messageFmt string, args ...any) {
	c.events = append(c.events, capturedEvent{eventtype, reason, fmt.Sprintf(messageFmt, args...), action})
}

// Failure events of Helm actions end with Helm's last log lines, debug ones
// included, in upstream's format; other events are left alone.
func TestFailureEventsCarryHelmsLastLogLines(t *testing.T) {
	tail := newHelmLogTail()
	log := slog.New(tail.handler(slog.DiscardHandler)).With("release", "web")
	for i := 1; i <= helmLogLines+3; i++ {
		log.Debug(fmt.Sprintf("line %d", i))
	}
	log.Error("hook failed", "hook", "web-migrate")

	rec := &captureRecorder{}
	events := logTailRecorder{EventRecorder: rec, tail: tail}
	events.AnnotatedEventf(nil, nil, nil, corev1.EventTypeWarning, helmv2.UpgradeFailedReason, helmv2.ActionHelmUpgrade.String(), "Helm upgrade failed: %s", "timeout")
	events.AnnotatedEventf(nil, nil, nil, corev1.EventTypeNormal, helmv2.UpgradeSucceededReason, helmv2.ActionHelmUpgrade.String(), "Helm upgrade succeeded")
	events.AnnotatedEventf(nil, nil, nil, corev1.EventTypeWarning, "ValuesError", helmv2.ActionResolveValues.String(), "no values")

	failed := rec.events[0].message
	head, logs, found := strings.Cut(failed, "\n\nLast Helm logs:\n\n")
	if !found || head != "Helm upgrade failed: timeout" {
		t.Fatalf("failure event %q, want the message then Helm's last logs", failed)
	}
	lines := strings.Split(logs, "\n")
	if len(lines) != helmLogLines {
		t.Fatalf("%d log lines, want the last %d:\n%s", len(lines), helmLogLines, logs)
	}
	if !strings.HasSuffix(lines[0], ": line 5 release=web") {
		t.Errorf("oldest kept line %q, want line 5", lines[0])
	}
	if !strings.HasSuffix(lines[len(lines)-1], ": error: hook failed release=web hook=web-migrate") {
		t.Errorf("newest line %q", lines[len(lines)-1])
	}
	for _, e := range rec.events[1:] {
		if strings.Contains(e.message, "Last Helm logs") {
			t.Errorf("%s event %s carries Helm's logs", e.eventtype, e.reason)
		}
	}
}
