package kubewait

import (
	"context"
	"errors"
	"regexp"
	"strings"
)

// Ending is how a readiness wait that failed came to an end. It picks the
// words its message starts with: upstream's for the same ending.
type Ending int

const (
	// TimedOut: the wait's time ran out with objects not ready.
	TimedOut Ending = iota
	// Stalled: an object reached a state it does not leave on its own
	// (kstatus Failed), and the wait gave up before its time ran out.
	Stalled
	// Canceled: the wait was stopped from outside (a shutdown, a newer
	// revision), before its time ran out.
	Canceled
)

// lead is what a message of the ending starts with. The first two are
// upstream helm-controller's own words; the third starts with the error
// upstream returns when its wait is canceled.
func (e Ending) lead() string {
	switch e {
	case Stalled:
		return "failed early due to stalled resources"
	case Canceled:
		return "context canceled while waiting for"
	default:
		return "timeout waiting for"
	}
}

// NotReady is one object a readiness wait ended without.
type NotReady struct {
	// Kind, Namespace (empty for cluster-scoped objects) and Name.
	Kind      string
	Namespace string
	Name      string
	// Status is the kstatus status: InProgress, Failed, Unknown, NotFound
	// (Current for an object only Helm's legacy checks hold back).
	Status string
	// Message explains the status; it may span lines.
	Message string
	// Undetermined: the wait ended before it could read the object at
	// all, so it has no status (upstream words it "can't determine
	// status for Kind/namespace/name").
	Undetermined bool
}

// ID names the object as upstream does: Kind/namespace/name, or Kind/name
// when it is cluster-scoped.
func (n NotReady) ID() string {
	if n.Namespace == "" {
		return n.Kind + "/" + n.Name
	}
	return n.Kind + "/" + n.Namespace + "/" + n.Name
}

// WaitError is a failed readiness wait, worded on one line that starts as
// upstream's does and keeps every detail after it:
//
//	timeout waiting for: [Deployment/apps/web status: 'InProgress'] (Deployment/apps/web: Deployment does not have minimum availability.)
//
// The brackets hold upstream's list, in the order the wait named the
// objects; the parentheses hold, one-lined, the notes added on the way up
// (AddNote), then the message of every object that has one, then the causes
// found afterwards (Explain).
type WaitError struct {
	Ending  Ending
	Objects []NotReady
	// Notes say where the wait ran (a resource group, after the post
	// hooks); they come first in the parentheses.
	Notes []string
	// Causes say why the objects are not ready, as found after the wait
	// (internal/waitcause); they come last, after the objects' messages,
	// which are upstream's.
	Causes []string
	// Err is the waiter's own error, kept for errors.Is and errors.As.
	Err error
}

func (e *WaitError) Error() string {
	var b strings.Builder
	b.WriteString(e.Ending.lead())
	b.WriteString(": [")
	for i, o := range e.Objects {
		if i > 0 {
			b.WriteString(", ")
		}
		if o.Undetermined {
			b.WriteString("can't determine status for " + o.ID())
			continue
		}
		b.WriteString(o.ID() + " status: '" + o.Status + "'")
	}
	b.WriteString("]")
	details := make([]string, 0, len(e.Notes)+len(e.Objects)+len(e.Causes))
	for _, n := range e.Notes {
		if n = OneLine(n); n != "" {
			details = append(details, n)
		}
	}
	for _, o := range e.Objects {
		if m := OneLine(o.Message); m != "" {
			details = append(details, o.ID()+": "+m)
		}
	}
	for _, c := range e.Causes {
		if c = OneLine(c); c != "" {
			details = append(details, c)
		}
	}
	if len(details) > 0 {
		b.WriteString(" (" + strings.Join(details, "; ") + ")")
	}
	return b.String()
}

func (e *WaitError) Unwrap() error { return e.Err }

// OneLine folds every run of white space in s, line breaks included, into
// one space, so that a message fits a condition, an event or a row of
// helm history.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// AddNote returns a copy of the WaitError err is or wraps with note added
// last to its notes, or nil when err holds none. Whatever wrapped the
// WaitError is left out of the copy, so its message still starts with the
// wait's words: the note is where the caller says what it would have
// wrapped it with.
func AddNote(err error, note string) *WaitError {
	var we *WaitError
	if !errors.As(err, &we) {
		return nil
	}
	noted := *we
	noted.Notes = append(append([]string{}, we.Notes...), note)
	return &noted
}

// WithCauses returns a copy of e with causes added after its own.
func (e *WaitError) WithCauses(causes []string) error {
	explained := *e
	explained.Causes = append(append([]string{}, e.Causes...), causes...)
	return &explained
}

// causer is a failed wait that can be worded again with causes added: a
// WaitError, or a wait error that words itself as one (afterHooks').
type causer interface {
	error
	WithCauses(causes []string) error
}

// Explain returns err with causes added last in the parentheses of the
// failed wait it is or wraps, or err itself when it holds none or there
// are no causes. Unlike AddNote, it keeps what wrapped the wait's error
// (Helm's "release x failed: ", a cleanup failure after it): the wait's
// words are replaced by the explained ones where they stand in err's
// message, so the message starts as it did. The result unwraps to err.
func Explain(err error, causes []string) error {
	var c causer
	if len(causes) == 0 || !errors.As(err, &c) {
		return err
	}
	msg, before := err.Error(), c.Error()
	if !strings.Contains(msg, before) {
		// A wrapper reworded the wait's message: there is no place to
		// add the causes without changing what it says.
		return err
	}
	return &explainedError{err: err, msg: strings.Replace(msg, before, c.WithCauses(causes).Error(), 1)}
}

// explainedError is an error whose message has the causes of its failed
// wait added; it is err for errors.Is and errors.As.
type explainedError struct {
	err error
	msg string
}

func (e *explainedError) Error() string { return e.msg }
func (e *explainedError) Unwrap() error { return e.err }

// helmNotReady is how Helm's status waiter (pkg/kube/statuswait.go, wait)
// words each object that is not ready; it joins one such error per object,
// then the context's error when the wait ended by it.
var helmNotReady = regexp.MustCompile(`(?s)^resource ([^/]*)/([^/]*)/(\S+) not ready\. status: (\S+), message: (.*)$`)

// FromHelm rewords the error of Helm's status waiter as a WaitError: an
// error whose every part names an object that is not ready, or is the end
// of the wait's context. Any other error (nil included) comes back as it
// was.
func FromHelm(err error) error {
	var we *WaitError
	if err == nil || errors.As(err, &we) {
		return err
	}
	parts := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		parts = joined.Unwrap()
	}
	out := &WaitError{Ending: Stalled, Err: err}
	for _, p := range parts {
		o, named := parseHelmNotReady(p)
		switch {
		case named:
			out.Objects = append(out.Objects, o)
		case errors.Is(p, context.DeadlineExceeded):
			out.Ending = TimedOut
		case errors.Is(p, context.Canceled):
			out.Ending = Canceled
		default:
			return err
		}
	}
	if len(out.Objects) == 0 {
		return err
	}
	if out.Ending == TimedOut {
		markUnread(out.Objects)
	}
	return out
}

// markUnread marks Undetermined each object a timed-out wait never read.
// Helm's collector starts every object at Unknown with no message and
// keeps that until the watch reports it; an Unknown the watch did report
// (a health check that could not be judged) comes with a message.
// Upstream, which keeps only what it read, says it can't determine the
// status of the first kind.
func markUnread(objects []NotReady) {
	for i, o := range objects {
		if o.Status == "Unknown" && strings.TrimSpace(o.Message) == "" {
			objects[i].Undetermined = true
		}
	}
}

// FromHelmFor is FromHelm for a wait over objects, which also words a
// wait whose time ran out before it could read any of them (Helm's
// status waiter then returns its watch's own error, "reporter failed to
// start: ... context deadline exceeded", naming nothing): as upstream,
// every object is named with its status undetermined, in the wait's order
// (upstream's order changes from run to run); the watch's error follows as
// a note.
func FromHelmFor(err error, objects []NotReady) error {
	err = FromHelm(err)
	var we *WaitError
	if err == nil || errors.As(err, &we) || len(objects) == 0 || !deadlineIn(err) {
		return err
	}
	named := make([]NotReady, len(objects))
	for i, o := range objects {
		named[i] = NotReady{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Undetermined: true}
	}
	return &WaitError{Ending: TimedOut, Objects: named, Notes: []string{err.Error()}, Err: err}
}

// deadlineIn tells whether err is the end of the wait's time. kstatus's
// watch formats the context's error into its own (%v), so its text is
// all that is left of it.
func deadlineIn(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || strings.HasSuffix(err.Error(), context.DeadlineExceeded.Error())
}

// NotReadyIn returns every object err names as not ready, through
// wrapping and joins: those of a WaitError, and those of each error of
// Helm's status waiter; the parts that name none are passed over.
func NotReadyIn(err error) []NotReady {
	var out []NotReady
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if we, ok := e.(*WaitError); ok {
			out = append(out, we.Objects...)
			return
		}
		if joined, ok := e.(interface{ Unwrap() []error }); ok {
			for _, part := range joined.Unwrap() {
				walk(part)
			}
			return
		}
		if o, ok := parseHelmNotReady(e); ok {
			out = append(out, o)
			return
		}
		walk(errors.Unwrap(e))
	}
	walk(err)
	return out
}

// parseHelmNotReady reads one object out of an error of Helm's status
// waiter.
func parseHelmNotReady(err error) (NotReady, bool) {
	m := helmNotReady.FindStringSubmatch(err.Error())
	if m == nil {
		return NotReady{}, false
	}
	return NotReady{Kind: m[1], Namespace: m[2], Name: m[3], Status: m[4], Message: m[5]}, true
}
