package kubewait

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// helmSays builds the error Helm's status waiter returns: one error per
// object that is not ready, then the context's error when that ended it.
func helmSays(ctxErr error, objects ...[5]string) error {
	var errs []error
	for _, o := range objects {
		errs = append(errs, fmt.Errorf("resource %s/%s/%s not ready. status: %s, message: %s", o[0], o[1], o[2], o[3], o[4]))
	}
	if ctxErr != nil {
		errs = append(errs, ctxErr)
	}
	return errors.Join(errs...)
}

func TestFromHelmWordsAFailedWaitAsUpstream(t *testing.T) {
	web := [5]string{"Deployment", "apps", "web", "InProgress", "Deployment does not have minimum availability."}
	job := [5]string{"Job", "apps", "migrate", "Failed", "Job Failed. failed: 1/1"}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{
			name: "one object, timed out",
			err:  helmSays(context.DeadlineExceeded, web),
			want: "timeout waiting for: [Deployment/apps/web status: 'InProgress'] (Deployment/apps/web: Deployment does not have minimum availability.)",
		},
		{
			name: "several objects, timed out, in the waiter's order",
			err:  helmSays(context.DeadlineExceeded, web, job),
			want: "timeout waiting for: [Deployment/apps/web status: 'InProgress', Job/apps/migrate status: 'Failed'] " +
				"(Deployment/apps/web: Deployment does not have minimum availability.; Job/apps/migrate: Job Failed. failed: 1/1)",
		},
		{
			name: "a failed object ended the wait early",
			err:  helmSays(nil, job),
			want: "failed early due to stalled resources: [Job/apps/migrate status: 'Failed'] (Job/apps/migrate: Job Failed. failed: 1/1)",
		},
		{
			name: "canceled from outside",
			err:  helmSays(context.Canceled, web),
			want: "context canceled while waiting for: [Deployment/apps/web status: 'InProgress'] (Deployment/apps/web: Deployment does not have minimum availability.)",
		},
		{
			name: "a message over several lines is folded",
			err:  helmSays(context.DeadlineExceeded, [5]string{"Gadget", "apps", "g", "Unknown", "healthCheckExprs:\n  no such key:\tphase\n"}),
			want: "timeout waiting for: [Gadget/apps/g status: 'Unknown'] (Gadget/apps/g: healthCheckExprs: no such key: phase)",
		},
		{
			name: "objects without a message, one cluster-scoped",
			err:  helmSays(context.DeadlineExceeded, [5]string{"Service", "apps", "lb", "InProgress", ""}, [5]string{"ClusterRole", "", "reader", "NotFound", " "}),
			want: "timeout waiting for: [Service/apps/lb status: 'InProgress', ClusterRole/reader status: 'NotFound']",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromHelm(tc.err)
			if got.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", got.Error(), tc.want)
			}
			if strings.ContainsAny(got.Error(), "\n\r") {
				t.Errorf("message spans lines: %q", got.Error())
			}
			// What the waiter said is still there for errors.Is.
			for _, ctxErr := range []error{context.DeadlineExceeded, context.Canceled} {
				if errors.Is(tc.err, ctxErr) != errors.Is(got, ctxErr) {
					t.Errorf("errors.Is(%v) changed from %t", ctxErr, errors.Is(tc.err, ctxErr))
				}
			}
		})
	}
}

func TestFromHelmLeavesOtherErrorsAlone(t *testing.T) {
	noted := AddNote(FromHelm(helmSays(nil, [5]string{"Job", "apps", "j", "Failed", ""})), "a note")
	for _, err := range []error{
		nil,
		errors.New("watch failed"),
		// The context's error alone names nothing to reword.
		helmSays(context.DeadlineExceeded),
		// A part that is neither an object nor the context's end.
		errors.Join(errors.New("resource list is not valid"), context.DeadlineExceeded),
		noted,
	} {
		if got := FromHelm(err); got != err {
			t.Errorf("FromHelm(%v) = %v, want it unchanged", err, got)
		}
	}
}

func TestAddNoteKeepsTheWaitsWordsFirst(t *testing.T) {
	waitErr := FromHelm(helmSays(context.DeadlineExceeded, [5]string{"Deployment", "apps", "web", "InProgress", "Replicas: 0/1"}))
	wrapped := fmt.Errorf("resource group app (2/3): %w", waitErr)

	noted := AddNote(wrapped, "resource group app (2/3)")
	if noted == nil {
		t.Fatal("AddNote found no WaitError in a wrapped one")
	}
	noted = AddNote(noted, "after the post-install hooks")
	want := "timeout waiting for: [Deployment/apps/web status: 'InProgress'] " +
		"(resource group app (2/3); after the post-install hooks; Deployment/apps/web: Replicas: 0/1)"
	if noted.Error() != want {
		t.Errorf("got  %q\nwant %q", noted.Error(), want)
	}
	if !errors.Is(noted, context.DeadlineExceeded) {
		t.Error("the noted error lost the waiter's deadline")
	}
	if waitErr.Error() == noted.Error() {
		t.Error("AddNote changed the error it was given")
	}
	if AddNote(errors.New("apply failed"), "note") != nil {
		t.Error("AddNote made a WaitError out of an error that holds none")
	}
}

func TestNotReadyInReadsThroughWrapping(t *testing.T) {
	helm := helmSays(context.DeadlineExceeded, [5]string{"Deployment", "apps", "web", "InProgress", "m"})
	want := []NotReady{{Kind: "Deployment", Namespace: "apps", Name: "web", Status: "InProgress", Message: "m"}}
	for name, err := range map[string]error{
		"Helm's error":            helm,
		"Helm's error, wrapped":   fmt.Errorf("waiting: %w", helm),
		"a WaitError, wrapped":    fmt.Errorf("waiting: %w", FromHelm(helm)),
		"a WaitError with a note": AddNote(FromHelm(helm), "n"),
		"nested joins, and a part that names nothing": fmt.Errorf("w: %w", errors.Join(
			errors.New("watch failed"), errors.Join(helm))),
	} {
		got := NotReadyIn(err)
		if len(got) != 1 || got[0] != want[0] {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	if got := NotReadyIn(errors.New("watch failed")); got != nil {
		t.Errorf("an unrelated error names %+v", got)
	}
}

// A wait whose time ran out before its watch could read anything (a
// timeout of 1 ms) returns the watch's error and names no object; upstream
// names every object with its status undetermined (in an order that
// changes from run to run; here the wait's), as
// TestATimeoutTooShortToWatchIsWordedAsUpstream (test/e2e) checks. Other errors are left to FromHelm.
func TestFromHelmForAWaitThatNeverSawAnObject(t *testing.T) {
	objects := []NotReady{{Kind: "Service", Namespace: "apps", Name: "web"}, {Kind: "Deployment", Namespace: "apps", Name: "web"}}
	// As kstatus's watch words it: the context's error formatted with %v.
	watchErr := fmt.Errorf("reporter failed to start: %v", fmt.Errorf("event funnel closed: %v", context.DeadlineExceeded))
	got := FromHelmFor(watchErr, objects)
	want := "timeout waiting for: [can't determine status for Service/apps/web, can't determine status for Deployment/apps/web] " +
		"(reporter failed to start: event funnel closed: context deadline exceeded)"
	if got.Error() != want {
		t.Errorf("got  %q\nwant %q", got.Error(), want)
	}
	if we := (*WaitError)(nil); !errors.As(got, &we) || !errors.Is(we.Err, watchErr) {
		t.Errorf("%#v: want a WaitError that keeps the watch's error", got)
	}
	named := FromHelmFor(helmSays(context.DeadlineExceeded, [5]string{"Service", "apps", "web", "InProgress", ""}), objects)
	if want := "timeout waiting for: [Service/apps/web status: 'InProgress']"; named.Error() != want {
		t.Errorf("a wait that named its objects: got %q, want %q", named.Error(), want)
	}
	for _, err := range []error{nil, errors.New("watch failed"), fmt.Errorf("list: %w", context.Canceled)} {
		if got := FromHelmFor(err, objects); got != err {
			t.Errorf("FromHelmFor(%v) = %v, want it unchanged", err, got)
		}
	}
	if got := FromHelmFor(watchErr, nil); got != watchErr {
		t.Errorf("with no objects: %v, want the error unchanged", got)
	}
}

func TestExplainAddsCausesLastAndKeepsTheWrapping(t *testing.T) {
	waitErr := AddNote(FromHelm(helmSays(context.DeadlineExceeded,
		[5]string{"Deployment", "apps", "web", "InProgress", "Deployment does not have\nminimum availability."})), "resource group app (2/3)")
	causes := []string{"pod web-7d9f: waits for Secret web-creds,\nwhich does not exist"}
	const words = "timeout waiting for: [Deployment/apps/web status: 'InProgress'] (resource group app (2/3); " +
		"Deployment/apps/web: Deployment does not have minimum availability."
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"bare", waitErr, words + "; pod web-7d9f: waits for Secret web-creds, which does not exist)"},
		{"wrapped by Helm", fmt.Errorf("release web failed: %w", waitErr),
			"release web failed: " + words + "; pod web-7d9f: waits for Secret web-creds, which does not exist)"},
		{"joined after", errors.Join(waitErr, errors.New("cleanup failed")),
			words + "; pod web-7d9f: waits for Secret web-creds, which does not exist)\ncleanup failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Explain(tc.err, causes)
			if got.Error() != tc.want {
				t.Errorf("got  %q\nwant %q", got.Error(), tc.want)
			}
			if !errors.Is(got, context.DeadlineExceeded) || !errors.Is(got, tc.err) {
				t.Error("the explained error lost what it wraps")
			}
			if strings.Contains(tc.err.Error(), "web-creds") {
				t.Error("Explain changed the error it was given")
			}
		})
	}

	// Objects without a message: the causes open the parentheses.
	bare := &WaitError{Ending: Stalled, Objects: []NotReady{{Kind: "Job", Namespace: "apps", Name: "migrate", Status: "Failed"}}}
	want := "failed early due to stalled resources: [Job/apps/migrate status: 'Failed'] (pod migrate-x: failed)"
	if got := Explain(bare, []string{"pod migrate-x: failed"}).Error(); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	other := errors.New("apply failed")
	if Explain(other, causes) != other {
		t.Error("Explain changed an error that holds no failed wait")
	}
	if Explain(waitErr, nil) != error(waitErr) {
		t.Error("Explain changed an error without causes")
	}
	// A wrapper that rewords the wait leaves no place for the causes.
	reworded := &rewordedError{err: waitErr}
	if Explain(reworded, causes) != error(reworded) {
		t.Error("Explain changed an error whose message does not hold the wait's")
	}
}

type rewordedError struct{ err error }

func (e *rewordedError) Error() string { return "the wait failed" }
func (e *rewordedError) Unwrap() error { return e.err }

// When the watch started but its time ran out before it read an object,
// Helm's status waiter names the object with the status its collector
// starts every object at, Unknown, and no message; upstream, which keeps
// only the statuses it has read, says it can't determine the status. An
// Unknown that was read (a health check that could not be judged) has a
// message and keeps its status.
func TestFromHelmWordsAnUnreadObjectAsUpstream(t *testing.T) {
	got := FromHelm(helmSays(context.DeadlineExceeded,
		[5]string{"Service", "apps", "web", "Unknown", ""},
		[5]string{"Deployment", "apps", "web", "InProgress", "Deployment does not have minimum availability."},
		[5]string{"Gadget", "apps", "g", "Unknown", "healthCheckExprs: no such key: phase"}))
	want := "timeout waiting for: [can't determine status for Service/apps/web, Deployment/apps/web status: 'InProgress', Gadget/apps/g status: 'Unknown'] " +
		"(Deployment/apps/web: Deployment does not have minimum availability.; Gadget/apps/g: healthCheckExprs: no such key: phase)"
	if got.Error() != want {
		t.Errorf("got  %q\nwant %q", got.Error(), want)
	}
	stalled := FromHelm(helmSays(nil, [5]string{"Service", "apps", "web", "Unknown", ""}))
	if want := "failed early due to stalled resources: [Service/apps/web status: 'Unknown']"; stalled.Error() != want {
		t.Errorf("a wait that did not time out: got %q, want %q", stalled.Error(), want)
	}
}
