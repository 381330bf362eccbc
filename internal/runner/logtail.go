package runner

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// helmLogLines is how many of Helm's last log lines a failure event
// carries.
const helmLogLines = 10

// helmLogTail keeps the last lines Helm logged during one reconcile, at
// every level, while passing each record on to the controller's logger.
// Failure events carry them, as upstream's do: they often say what the
// condition's one-line message cannot (the hook that failed, the object
// that conflicted).
type helmLogTail struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newHelmLogTail() *helmLogTail { return &helmLogTail{lines: make([]string, helmLogLines)} }

func (t *helmLogTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines[t.next] = line
	t.next = (t.next + 1) % len(t.lines)
	t.full = t.full || t.next == 0
}

// String returns the kept lines, oldest first.
func (t *helmLogTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var kept []string
	if t.full {
		kept = append(kept, t.lines[t.next:]...)
	}
	kept = append(kept, t.lines[:t.next]...)
	return strings.Join(kept, "\n")
}

// handler returns a slog handler that records into t and forwards to next.
func (t *helmLogTail) handler(next slog.Handler) slog.Handler {
	return &tailHandler{tail: t, next: next}
}

type tailHandler struct {
	tail  *helmLogTail
	next  slog.Handler
	attrs []slog.Attr
}

// Enabled is true at every level: debug lines are kept even when the
// controller's log level drops them.
func (h *tailHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *tailHandler) Handle(ctx context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Time.UTC().Format(time.RFC3339Nano))
	b.WriteString(": ")
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		if a.Key != "" {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		}
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.tail.add(b.String())
	if h.next != nil && h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *tailHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := &tailHandler{tail: h.tail, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
	if h.next != nil {
		c.next = h.next.WithAttrs(attrs)
	}
	return c
}

// WithGroup keeps the attributes flat in the kept lines; the forwarded
// records keep their groups.
func (h *tailHandler) WithGroup(name string) slog.Handler {
	c := &tailHandler{tail: h.tail, attrs: h.attrs}
	if h.next != nil {
		c.next = h.next.WithGroup(name)
	}
	return c
}

// helmFailureReasons are the events that carry Helm's last log lines.
var helmFailureReasons = map[string]bool{
	helmv2.InstallFailedReason:   true,
	helmv2.UpgradeFailedReason:   true,
	helmv2.TestFailedReason:      true,
	helmv2.RollbackFailedReason:  true,
	helmv2.UninstallFailedReason: true,
}

// logTailRecorder adds Helm's last log lines to the failure events of the
// state machine, in upstream's format.
type logTailRecorder struct {
	reconcile.EventRecorder
	tail *helmLogTail
}

func (r logTailRecorder) AnnotatedEventf(obj, related runtime.Object, annotations map[string]string, eventtype, reason, action, messageFmt string, args ...any) {
	if eventtype == corev1.EventTypeWarning && helmFailureReasons[reason] {
		if logs := r.tail.String(); logs != "" {
			messageFmt, args = "%s\n\nLast Helm logs:\n\n%s", []any{fmt.Sprintf(messageFmt, args...), logs}
		}
	}
	r.EventRecorder.AnnotatedEventf(obj, related, annotations, eventtype, reason, action, messageFmt, args...)
}
