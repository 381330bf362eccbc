package afterhooks

import (
	"strings"
	"testing"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// The marker is the only thing that tells a restarted controller that a
// pending revision is ours and when its wait ends. A marker we write and
// then fail to read back would make the revision look like an interrupted
// Helm action (unlocked and remediated, its hooks possibly run again); one
// read back with another deadline or description would resume the wait for
// the wrong time or commit the wrong description.

// Descriptions Helm records for the actions we wrap, plus texts a user can
// set through the action's Description option that contain the marker's
// own separators, which parseMarker must not be confused by.
var markerOnSuccessSeeds = []string{
	"",
	"Install complete",
	"Upgrade complete",
	"Rollback to 3",
	"custom (with parens); and: colons",
	")",
	"; on success: ",
	"x); on success: y",
	markerPrefix + "2026-05-01T10:03:00Z" + markerDeadline,
	markerPrefix + "2026-05-01T10:03:00Z" + markerDeadline + markerOnSuccess + "Upgrade complete",
	"line one\nline two",
	"\xff\xfe not UTF-8",
}

// FuzzMarkerRoundTrip: every marker the wrapper can write reads back as the
// same marker, whatever description Helm or the user supplied.
func FuzzMarkerRoundTrip(f *testing.F) {
	deadlines := []int64{
		time.Date(2026, 5, 1, 10, 3, 0, 0, time.UTC).Unix(),
		0,
		-1,
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix(),
		// Unreachable (a deadline is now plus a time.Duration), but the
		// fuzzer gets there anyway: years the RFC 3339 layout cannot hold.
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC).Unix(),
	}
	for i, s := range markerOnSuccessSeeds {
		f.Add(deadlines[i%len(deadlines)], s)
	}
	f.Fuzz(func(t *testing.T, unix int64, onSuccess string) {
		m := marker{deadline: time.Unix(unix, 0).UTC(), onSuccess: onSuccess}
		s := m.String()
		got, ok := parseMarker(s)
		if year := m.deadline.Year(); year < 0 || year > 9999 {
			// time.Format renders such years in a form time.Parse refuses:
			// the marker must then read as no marker at all, never as one
			// with another deadline.
			if ok {
				t.Fatalf("deadline in year %d: %q parsed as %+v", year, s, got)
			}
			return
		}
		if !ok {
			t.Fatalf("%q (from %+v) does not parse", s, m)
		}
		if !got.deadline.Equal(m.deadline) || got.onSuccess != m.onSuccess {
			t.Fatalf("%q parsed as deadline %v onSuccess %q, want %v %q", s, got.deadline, got.onSuccess, m.deadline, m.onSuccess)
		}
		// What the held revision shows through the public check.
		for _, st := range []rcommon.Status{rcommon.StatusPendingInstall, rcommon.StatusPendingUpgrade, rcommon.StatusPendingRollback} {
			rel := &releasev1.Release{Info: &releasev1.Info{Status: st, Description: s}}
			if awaiting, dl := IsAwaitingReadiness(rel); !awaiting || !dl.Equal(m.deadline) {
				t.Fatalf("%s %q: IsAwaitingReadiness = %v, %v", st, s, awaiting, dl)
			}
		}
	})
}

// FuzzParseMarker: any description, ours, Helm's, a user's or an edited one,
// is either no marker or a marker that renders back to itself, so that what
// a restarted controller reads is exactly what it would write.
func FuzzParseMarker(f *testing.F) {
	for _, s := range markerOnSuccessSeeds {
		f.Add(s)
	}
	for _, s := range []string{
		// From TestIsAwaitingReadiness.
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z)",
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z); on success: Upgrade complete",
		"Waiting for resources to become ready (afterHooks, deadline soon)",
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z) and more",
		"Waiting for resources to become ready (afterHooks, deadline ",
		"Preparing upgrade",
		// Valid RFC 3339 that we never write: another offset, fractions.
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T12:03:00+02:00); on success: Install complete",
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00.5Z)",
		// An offset that moves the UTC deadline out of the years RFC 3339
		// can render.
		"Waiting for resources to become ready (afterHooks, deadline 9999-12-31T23:59:59-01:00)",
		"Waiting for resources to become ready (afterHooks, deadline 0000-01-01T00:00:00+01:00)",
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z); on success: ",
		"Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z);on success: x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, desc string) {
		m, ok := parseMarker(desc)
		if !ok {
			if m != (marker{}) {
				t.Fatalf("%q: not a marker but parsed as %+v", desc, m)
			}
			return
		}
		if !strings.HasPrefix(desc, markerPrefix) {
			t.Fatalf("%q parsed as a marker without its prefix", desc)
		}
		s := m.String()
		again, ok := parseMarker(s)
		if !ok {
			t.Fatalf("%q parsed as %+v, which renders as %q, which does not parse", desc, m, s)
		}
		if !again.deadline.Equal(m.deadline) || again.onSuccess != m.onSuccess {
			t.Fatalf("%q parsed as %v %q; re-rendered %q parses as %v %q", desc, m.deadline, m.onSuccess, s, again.deadline, again.onSuccess)
		}
	})
}

// FuzzIsAwaitingReadiness: the check a reconciler runs on every latest
// revision agrees with parseMarker and the pending statuses, for any status
// and description found in storage.
func FuzzIsAwaitingReadiness(f *testing.F) {
	mark := marker{deadline: time.Date(2026, 5, 1, 10, 3, 0, 0, time.UTC), onSuccess: "Upgrade complete"}.String()
	statuses := []string{
		string(rcommon.StatusPendingInstall), string(rcommon.StatusPendingUpgrade), string(rcommon.StatusPendingRollback),
		string(rcommon.StatusDeployed), string(rcommon.StatusFailed), string(rcommon.StatusSuperseded),
		string(rcommon.StatusUninstalling), string(rcommon.StatusUnknown), "", "PENDING-INSTALL",
	}
	descs := []string{mark, "Preparing upgrade", "Install complete", "Waiting for resources to become ready (afterHooks, deadline soon)", ""}
	for i, st := range statuses {
		f.Add(st, descs[i%len(descs)], i%4 == 3)
	}
	f.Fuzz(func(t *testing.T, status, desc string, noInfo bool) {
		rel := &releasev1.Release{Name: relName, Version: 2}
		if !noInfo {
			rel.Info = &releasev1.Info{Status: rcommon.Status(status), Description: desc}
		}
		awaiting, deadline := IsAwaitingReadiness(rel)
		m, parsed := parseMarker(desc)
		want := !noInfo && parsed && isPendingAction(rcommon.Status(status))
		if awaiting != want {
			t.Fatalf("status %q description %q (info %v): IsAwaitingReadiness = %v, want %v", status, desc, !noInfo, awaiting, want)
		}
		if awaiting && !deadline.Equal(m.deadline) {
			t.Fatalf("deadline %v, marker says %v", deadline, m.deadline)
		}
		if !awaiting && !deadline.IsZero() {
			t.Fatalf("deadline %v for a revision not awaiting readiness", deadline)
		}
	})
}
