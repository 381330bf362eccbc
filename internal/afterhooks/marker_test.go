package afterhooks

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsAwaitingReadiness(t *testing.T) {
	deadline := time.Date(2026, 5, 1, 10, 3, 0, 0, time.UTC)
	mark := marker{deadline: deadline, onSuccess: "Upgrade complete"}.String()
	rel := func(s rcommon.Status, desc string) *releasev1.Release {
		return &releasev1.Release{Name: relName, Version: 2, Info: &releasev1.Info{Status: s, Description: desc}}
	}
	tests := []struct {
		name string
		rel  *releasev1.Release
		want bool
	}{
		{"nil", nil, false},
		{"no info", &releasev1.Release{}, false},
		{"pending-install with marker", rel(rcommon.StatusPendingInstall, mark), true},
		{"pending-upgrade with marker", rel(rcommon.StatusPendingUpgrade, mark), true},
		{"pending-rollback with marker", rel(rcommon.StatusPendingRollback, mark), true},
		{"marker without on-success part", rel(rcommon.StatusPendingUpgrade, "Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z)"), true},
		{"pending without marker (interrupted Helm action)", rel(rcommon.StatusPendingUpgrade, "Preparing upgrade"), false},
		{"deployed with a stale marker", rel(rcommon.StatusDeployed, mark), false},
		{"failed with a stale marker", rel(rcommon.StatusFailed, mark), false},
		{"bad deadline", rel(rcommon.StatusPendingInstall, "Waiting for resources to become ready (afterHooks, deadline soon)"), false},
		{"garbage after deadline", rel(rcommon.StatusPendingInstall, "Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z) and more"), false},
		{"prefix only", rel(rcommon.StatusPendingInstall, "Waiting for resources to become ready (afterHooks, deadline "), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, dl := IsAwaitingReadiness(tt.rel)
			if got != tt.want {
				t.Fatalf("IsAwaitingReadiness = %v, want %v", got, tt.want)
			}
			if got && !dl.Equal(deadline) {
				t.Errorf("deadline %v, want %v", dl, deadline)
			}
			if !got && !dl.IsZero() {
				t.Errorf("deadline %v for a release not awaiting", dl)
			}
		})
	}
}

func TestMarkerRoundTrip(t *testing.T) {
	for _, onSuccess := range []string{"", "Install complete", "Rollback to 3", "custom (with parens); and: colons"} {
		m := marker{deadline: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), onSuccess: onSuccess}
		got, ok := parseMarker(m.String())
		if !ok || !got.deadline.Equal(m.deadline) || got.onSuccess != onSuccess {
			t.Errorf("%q: parsed %+v, %v", m.String(), got, ok)
		}
	}
}

func TestResumeTimeout(t *testing.T) {
	now := fixedNow
	tests := []struct {
		name     string
		deadline time.Time
		limit    time.Duration
		want     time.Duration
	}{
		{"deadline ahead", now.Add(2 * time.Minute), 5 * time.Minute, 2 * time.Minute},
		{"deadline passed", now.Add(-time.Hour), 5 * time.Minute, MinResumeWait},
		// A deadline further out than a whole wait (clock skew between
		// nodes, an edited description) must not hold the revision longer.
		{"deadline beyond the timeout", now.Add(72 * time.Hour), 5 * time.Minute, 5 * time.Minute},
		{"no limit known", now.Add(72 * time.Hour), 0, 72 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResumeTimeout(tt.deadline, now, tt.limit); got != tt.want {
				t.Errorf("ResumeTimeout = %v, want %v", got, tt.want)
			}
		})
	}
}

// A controller restart between the action and the end of the wait: a new
// Secret driver on the same Secrets sees the marker, and Recover finishes
// the job. Custom labels survive.
func TestRecoverThroughSecrets(t *testing.T) {
	labels := map[string]string{"team": "a"}
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *env)
		pending string
		// after Commit and Fail
		committed, failed string
		superseded        []int
		onSuccess         string
	}{
		{
			name:       "install",
			pending:    "v1=pending-install",
			committed:  "v1=deployed",
			failed:     "v1=failed",
			superseded: []int{},
			onSuccess:  "Install complete",
		},
		{
			name:       "upgrade",
			setup:      func(t *testing.T, e *env) { must(t, e.install(nil, actionOpts{labels: labels})) },
			pending:    "v1=deployed v2=pending-upgrade",
			committed:  "v1=superseded v2=deployed",
			failed:     "v1=deployed v2=failed",
			superseded: []int{1},
			onSuccess:  "Upgrade complete",
		},
		{
			name: "rollback",
			setup: func(t *testing.T, e *env) {
				must(t, e.install(nil, actionOpts{labels: labels}))
				must(t, e.upgrade(nil, actionOpts{}))
			},
			pending:    "v1=superseded v2=deployed v3=pending-rollback",
			committed:  "v1=superseded v2=superseded v3=deployed",
			failed:     "v1=superseded v2=deployed v3=failed",
			superseded: []int{2},
			onSuccess:  "Rollback to 1",
		},
	}
	for _, tt := range tests {
		for _, outcome := range []string{"commit", "fail"} {
			t.Run(tt.name+"/"+outcome, func(t *testing.T) {
				e, cs := newSecretsEnv()
				if tt.setup != nil {
					tt.setup(t, e)
				}
				wrapped, _ := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
				var err error
				switch tt.name {
				case "install":
					err = e.install(wrapped, actionOpts{afterHooks: true, labels: labels})
				case "upgrade":
					err = e.upgrade(wrapped, actionOpts{afterHooks: true})
				case "rollback":
					err = e.rollback(wrapped, actionOpts{afterHooks: true, toVersion: 1})
				}
				must(t, err)

				// "Restart": forget the Held, open a new driver.
				fresh := newSecretsDriver(cs)
				if got := statuses(t, fresh); got != tt.pending {
					t.Fatalf("after the action: %s, want %s", got, tt.pending)
				}
				latest := history(t, fresh)
				var last *releasev1.Release
				for _, r := range latest {
					if last == nil || r.Version > last.Version {
						last = r
					}
				}
				// Get strips Helm's system labels; ours survive.
				got := mustGet(t, fresh, last.Version)
				if got.Labels["team"] != "a" {
					t.Errorf("labels after the action: %v", got.Labels)
				}
				awaiting, deadline := IsAwaitingReadiness(got)
				if !awaiting || !deadline.Equal(fixedNow.Add(waitLimit)) {
					t.Fatalf("IsAwaitingReadiness = %v, %v", awaiting, deadline)
				}
				if p := hookPhase(got); p != releasev1.HookPhaseSucceeded {
					t.Errorf("hook phase %q", p)
				}
				secret, err := cs.CoreV1().Secrets(relNS).Get(context.Background(), releaseKey(relName, last.Version), metav1.GetOptions{})
				must(t, err)
				if secret.Labels["status"] != string(got.Info.Status) || secret.Labels["team"] != "a" {
					t.Errorf("Secret labels %v", secret.Labels)
				}

				held, err := Recover(fresh, relName)
				if err != nil {
					t.Fatalf("Recover: %v", err)
				}
				if !held.Holding() || held.Version() != last.Version || !held.Deadline().Equal(deadline) {
					t.Errorf("recovered Holding=%v Version=%d Deadline=%v", held.Holding(), held.Version(), held.Deadline())
				}
				if s := supersededOf(held); !slices.Equal(s, tt.superseded) {
					t.Errorf("recovered Superseded() = %v, want %v", s, tt.superseded)
				}
				want := tt.committed
				if outcome == "commit" {
					rel, err := held.Commit(context.Background(), fresh)
					must(t, err)
					if rel.Info.Description != tt.onSuccess {
						t.Errorf("committed description %q, want %q", rel.Info.Description, tt.onSuccess)
					}
				} else {
					want = tt.failed
					_, err := held.Fail(context.Background(), fresh, "Deployment/apps/web: InProgress")
					must(t, err)
				}
				if got := statuses(t, fresh); got != want {
					t.Errorf("after %s: %s, want %s", outcome, got, want)
				}
				final := mustGet(t, fresh, last.Version)
				if final.Labels["team"] != "a" {
					t.Errorf("labels after %s: %v", outcome, final.Labels)
				}
				if p := hookPhase(final); p != releasev1.HookPhaseSucceeded {
					t.Errorf("hook phase after %s: %q", outcome, p)
				}
				if _, err := Recover(fresh, relName); !errors.Is(err, ErrNotAwaiting) {
					t.Errorf("Recover after %s: %v, want ErrNotAwaiting", outcome, err)
				}
			})
		}
	}
}

func TestRecoverRefusesOtherReleases(t *testing.T) {
	e, _ := newSecretsEnv()
	if _, err := Recover(e.d, relName); !errors.Is(err, ErrNotAwaiting) {
		t.Errorf("no revisions: %v", err)
	}
	must(t, e.install(nil, actionOpts{}))
	if _, err := Recover(e.d, relName); !errors.Is(err, ErrNotAwaiting) {
		t.Errorf("deployed: %v", err)
	}
	// A pending revision left by an interrupted plain Helm action.
	rel := mustGet(t, e.d, 1)
	rel.Info.Status = rcommon.StatusPendingUpgrade
	rel.Info.Description = "Preparing upgrade"
	rel.Version = 2
	must(t, e.d.Create(releaseKey(relName, 2), rel))
	if _, err := Recover(e.d, relName); !errors.Is(err, ErrNotAwaiting) {
		t.Errorf("interrupted upgrade: %v", err)
	}
}
