package afterhooks

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	rcommon "helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
)

var errHook = errors.New("hook job failed")

// afterHooksScenarios run a Helm action as afterHooks does, on a history
// made by plain Helm actions.
var afterHooksScenarios = []struct {
	name  string
	setup func(t *testing.T, e *env)
	run   func(e *env, d driver.Driver) error
	// statuses after the action, after Commit and after Fail
	pending, committed, failed string
	superseded                 []int
	// description Commit restores, and the start of Fail's
	onSuccess, failPrefix string
}{
	{
		name:       "install",
		run:        func(e *env, d driver.Driver) error { return e.install(d, actionOpts{afterHooks: true}) },
		pending:    "v1=pending-install",
		committed:  "v1=deployed",
		failed:     "v1=failed",
		onSuccess:  "Install complete",
		failPrefix: `Release "app" failed: `,
	},
	{
		name: "install replacing an uninstalled release",
		setup: func(t *testing.T, e *env) {
			must(t, e.install(nil, actionOpts{}))
			must(t, e.uninstallKeepHistory())
		},
		run:        func(e *env, d driver.Driver) error { return e.install(d, actionOpts{afterHooks: true, replace: true}) },
		pending:    "v1=uninstalled v2=pending-install",
		committed:  "v1=superseded v2=deployed",
		failed:     "v1=uninstalled v2=failed",
		superseded: []int{1},
		onSuccess:  "Install complete",
		failPrefix: `Release "app" failed: `,
	},
	{
		name:       "upgrade",
		setup:      func(t *testing.T, e *env) { must(t, e.install(nil, actionOpts{})) },
		run:        func(e *env, d driver.Driver) error { return e.upgrade(d, actionOpts{afterHooks: true}) },
		pending:    "v1=deployed v2=pending-upgrade",
		committed:  "v1=superseded v2=deployed",
		failed:     "v1=deployed v2=failed",
		superseded: []int{1},
		onSuccess:  "Upgrade complete",
		failPrefix: `Upgrade "app" failed: `,
	},
	{
		name: "upgrade after a failed upgrade",
		setup: func(t *testing.T, e *env) {
			must(t, e.install(nil, actionOpts{}))
			e.kc.WatchUntilReadyError = errHook
			if err := e.upgrade(nil, actionOpts{}); err == nil {
				t.Fatal("setup upgrade should fail")
			}
			e.kc.WatchUntilReadyError = nil
		},
		run:        func(e *env, d driver.Driver) error { return e.upgrade(d, actionOpts{afterHooks: true}) },
		pending:    "v1=deployed v2=failed v3=pending-upgrade",
		committed:  "v1=superseded v2=failed v3=deployed",
		failed:     "v1=deployed v2=failed v3=failed",
		superseded: []int{1},
		onSuccess:  "Upgrade complete",
		failPrefix: `Upgrade "app" failed: `,
	},
	{
		name: "rollback",
		setup: func(t *testing.T, e *env) {
			must(t, e.install(nil, actionOpts{}))
			must(t, e.upgrade(nil, actionOpts{}))
		},
		run:        func(e *env, d driver.Driver) error { return e.rollback(d, actionOpts{afterHooks: true, toVersion: 1}) },
		pending:    "v1=superseded v2=deployed v3=pending-rollback",
		committed:  "v1=superseded v2=superseded v3=deployed",
		failed:     "v1=superseded v2=deployed v3=failed",
		superseded: []int{2},
		onSuccess:  "Rollback to 1",
		failPrefix: `Release "app" failed: `,
	},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWrapHoldsDeployedUntilCommitOrFail(t *testing.T) {
	const reason = "1 resource(s) not ready within 3m0s: Deployment/apps/web: InProgress: Deployment does not have minimum availability."
	for kind, newEnv := range envKinds {
		for _, sc := range afterHooksScenarios {
			for _, outcome := range []string{"commit", "fail"} {
				t.Run(kind+"/"+sc.name+"/"+outcome, func(t *testing.T) {
					e := newEnv()
					if sc.setup != nil {
						sc.setup(t, e)
					}
					wrapped, held := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
					if err := sc.run(e, wrapped); err != nil {
						t.Fatalf("action: %v", err)
					}

					// Held, not deployed.
					if got := statuses(t, e.d); got != sc.pending {
						t.Fatalf("after the action: %s, want %s", got, sc.pending)
					}
					if !held.Holding() || helmFailedOf(held) {
						t.Fatalf("Holding=%v helm failed=%v, want true, false", held.Holding(), helmFailedOf(held))
					}
					if got := supersededOf(held); !slices.Equal(got, sc.superseded) {
						t.Errorf("Superseded() = %v, want %v", got, sc.superseded)
					}
					version := held.Version()
					target := mustGet(t, e.d, version)
					wantDeadline := fixedNow.Add(waitLimit)
					wantDesc := "Waiting for resources to become ready (afterHooks, deadline 2026-05-01T10:03:00Z); on success: " + sc.onSuccess
					if target.Info.Description != wantDesc {
						t.Errorf("pending description %q, want %q", target.Info.Description, wantDesc)
					}
					if p := hookPhase(target); p != releasev1.HookPhaseSucceeded {
						t.Errorf("post hook LastRun phase in storage = %q, want Succeeded", p)
					}
					awaiting, deadline := IsAwaitingReadiness(target)
					if !awaiting || !deadline.Equal(wantDeadline) || !held.Deadline().Equal(wantDeadline) {
						t.Errorf("IsAwaitingReadiness = %v, %v (Deadline() %v), want true, %v", awaiting, deadline, held.Deadline(), wantDeadline)
					}
					if r := held.Release(); r == nil || r.Info.Status != rcommon.StatusDeployed || r.Version != version {
						t.Errorf("Release() = %+v, want the deployed v%d", r, version)
					}

					ctx := context.Background()
					switch outcome {
					case "commit":
						// The wrapper itself is accepted and bypassed.
						rel, err := held.Commit(ctx, wrapped)
						if err != nil {
							t.Fatalf("Commit: %v", err)
						}
						if got := statuses(t, e.d); got != sc.committed {
							t.Errorf("after Commit: %s, want %s", got, sc.committed)
						}
						stored := mustGet(t, e.d, version)
						if stored.Info.Description != sc.onSuccess || rel.Info.Description != sc.onSuccess {
							t.Errorf("committed description %q (returned %q), want %q", stored.Info.Description, rel.Info.Description, sc.onSuccess)
						}
						if p := hookPhase(stored); p != releasev1.HookPhaseSucceeded {
							t.Errorf("post hook LastRun phase after Commit = %q", p)
						}
						if ok, _ := IsAwaitingReadiness(stored); ok {
							t.Error("committed revision still awaiting readiness")
						}
					case "fail":
						rel, err := held.Fail(ctx, e.d, reason)
						if err != nil {
							t.Fatalf("Fail: %v", err)
						}
						if got := statuses(t, e.d); got != sc.failed {
							t.Errorf("after Fail: %s, want %s", got, sc.failed)
						}
						stored := mustGet(t, e.d, version)
						want := sc.failPrefix + reason
						if stored.Info.Description != want || rel.Info.Description != want {
							t.Errorf("failed description %q, want %q", stored.Info.Description, want)
						}
					}
					if held.Holding() {
						t.Error("still holding after " + outcome)
					}
					if _, err := held.Commit(ctx, e.d); !errors.Is(err, ErrNotHeld) {
						t.Errorf("second Commit: %v, want ErrNotHeld", err)
					}
					if _, err := held.Fail(ctx, e.d, "x"); !errors.Is(err, ErrNotHeld) {
						t.Errorf("Fail after %s: %v, want ErrNotHeld", outcome, err)
					}
				})
			}
		}
	}
}

// After Commit or Fail the wrapper passes everything through, so the same
// configuration can run the next action (a test, an upgrade) normally.
func TestWrapPassesThroughAfterCommit(t *testing.T) {
	e := newMemEnv()
	wrapped, held := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
	must(t, e.install(wrapped, actionOpts{afterHooks: true}))
	if _, err := held.Commit(context.Background(), e.d); err != nil {
		t.Fatal(err)
	}
	must(t, e.upgrade(wrapped, actionOpts{}))
	if got, want := statuses(t, e.d), "v1=superseded v2=deployed"; got != want {
		t.Errorf("plain upgrade through a finished wrapper: %s, want %s", got, want)
	}
}

// Helm's own failures must reach storage exactly as without the wrapper.
// The Secret driver is used because Helm's memory driver aliases the
// objects Helm mutates, so plain Helm's result there is not what a real
// driver stores.
func TestHelmFailuresPassThrough(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e *env)
		arm   func(e *env)
		run   func(e *env, d driver.Driver) error
		want  string
		// helmFailed: Helm recorded the target failed.
		helmFailed bool
	}{
		{
			name:       "install, post-install hook fails",
			arm:        func(e *env) { e.kc.WatchUntilReadyError = errHook },
			run:        func(e *env, d driver.Driver) error { return e.install(d, actionOpts{afterHooks: true}) },
			want:       "v1=failed",
			helmFailed: true,
		},
		{
			name:  "upgrade, post-upgrade hook fails, cleanupOnFail",
			setup: func(t *testing.T, e *env) { must(t, e.install(nil, actionOpts{})) },
			arm:   func(e *env) { e.kc.WatchUntilReadyError = errHook },
			run: func(e *env, d driver.Driver) error {
				return e.upgrade(d, actionOpts{afterHooks: true, cleanupOnFail: true})
			},
			want:       "v1=deployed v2=failed",
			helmFailed: true,
		},
		{
			name:       "upgrade, apply fails",
			setup:      func(t *testing.T, e *env) { must(t, e.install(nil, actionOpts{})) },
			arm:        func(e *env) { e.kc.UpdateError = errors.New("apply refused") },
			run:        func(e *env, d driver.Driver) error { return e.upgrade(d, actionOpts{afterHooks: true}) },
			want:       "v1=deployed v2=failed",
			helmFailed: true,
		},
		{
			name: "rollback, apply fails, cleanupOnFail",
			setup: func(t *testing.T, e *env) {
				must(t, e.install(nil, actionOpts{}))
				must(t, e.upgrade(nil, actionOpts{}))
			},
			arm: func(e *env) { e.kc.UpdateError = errors.New("apply refused") },
			run: func(e *env, d driver.Driver) error {
				return e.rollback(d, actionOpts{afterHooks: true, cleanupOnFail: true, toVersion: 1})
			},
			// Helm supersedes the current revision even though the
			// rollback failed.
			want:       "v1=superseded v2=superseded v3=failed",
			helmFailed: true,
		},
		{
			name: "rollback, post-rollback hook fails",
			setup: func(t *testing.T, e *env) {
				must(t, e.install(nil, actionOpts{}))
				must(t, e.upgrade(nil, actionOpts{}))
			},
			arm: func(e *env) { e.kc.WatchUntilReadyError = errHook },
			run: func(e *env, d driver.Driver) error {
				return e.rollback(d, actionOpts{afterHooks: true, toVersion: 1})
			},
			// Helm leaves the target pending-rollback.
			want: "v1=superseded v2=deployed v3=pending-rollback",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			results := map[bool]map[int]*releasev1.Release{}
			for _, wrap := range []bool{false, true} {
				e, _ := newSecretsEnv()
				if tt.setup != nil {
					tt.setup(t, e)
				}
				tt.arm(e)
				d := e.d
				var held *Held
				if wrap {
					d, held = Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
				}
				if err := tt.run(e, d); err == nil {
					t.Fatalf("wrap=%v: action succeeded, want an error", wrap)
				}
				if got := statuses(t, e.d); got != tt.want {
					t.Errorf("wrap=%v: %s, want %s", wrap, got, tt.want)
				}
				results[wrap] = history(t, e.d)
				if held == nil {
					continue
				}
				if held.Holding() || helmFailedOf(held) != tt.helmFailed {
					t.Errorf("Holding=%v helm failed=%v, want false, %v", held.Holding(), helmFailedOf(held), tt.helmFailed)
				}
				if _, err := held.Commit(context.Background(), e.d); !errors.Is(err, ErrNotHeld) {
					t.Errorf("Commit: %v, want ErrNotHeld", err)
				}
				for _, rel := range results[true] {
					if ok, _ := IsAwaitingReadiness(rel); ok {
						t.Errorf("v%d (%s) looks awaiting readiness", rel.Version, rel.Info.Status)
					}
				}
			}
			for v, plain := range results[false] {
				w := results[true][v]
				if w == nil {
					t.Errorf("v%d missing with the wrapper", v)
					continue
				}
				if w.Info.Status != plain.Info.Status || w.Info.Description != plain.Info.Description {
					t.Errorf("v%d: wrapped %s %q, plain %s %q", v, w.Info.Status, w.Info.Description, plain.Info.Status, plain.Info.Description)
				}
				if hookPhase(w) != hookPhase(plain) {
					t.Errorf("v%d: hook phase wrapped %q, plain %q", v, hookPhase(w), hookPhase(plain))
				}
			}
		})
	}
}

func TestMaxHistoryNeverPrunesHeldPrevious(t *testing.T) {
	failUpgrade := func(t *testing.T, e *env) {
		e.kc.WatchUntilReadyError = errHook
		if err := e.upgrade(nil, actionOpts{}); err == nil {
			t.Fatal("setup upgrade should fail")
		}
		e.kc.WatchUntilReadyError = nil
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, e *env)
		run     func(e *env, d driver.Driver) error
		pending string
		// second, if set, runs after Fail as another afterHooks action
		second             func(e *env, d driver.Driver) error
		secondPending      string
		committed          string
		supersededAtCommit []int
	}{
		{
			name: "upgrade, previous is the newest",
			setup: func(t *testing.T, e *env) {
				must(t, e.install(nil, actionOpts{}))
				must(t, e.upgrade(nil, actionOpts{}))
				must(t, e.upgrade(nil, actionOpts{}))
			},
			run:                func(e *env, d driver.Driver) error { return e.upgrade(d, actionOpts{afterHooks: true, maxHistory: 2}) },
			pending:            "v3=deployed v4=pending-upgrade",
			committed:          "v3=superseded v4=deployed",
			supersededAtCommit: []int{3},
		},
		{
			name: "upgrade, previous is the oldest, then a retry after Fail",
			setup: func(t *testing.T, e *env) {
				must(t, e.install(nil, actionOpts{}))
				failUpgrade(t, e)
				failUpgrade(t, e)
			},
			run:                func(e *env, d driver.Driver) error { return e.upgrade(d, actionOpts{afterHooks: true, maxHistory: 2}) },
			pending:            "v1=deployed v4=pending-upgrade",
			second:             func(e *env, d driver.Driver) error { return e.upgrade(d, actionOpts{afterHooks: true, maxHistory: 2}) },
			secondPending:      "v1=deployed v5=pending-upgrade",
			committed:          "v1=superseded v5=deployed",
			supersededAtCommit: []int{1},
		},
		{
			name: "rollback",
			setup: func(t *testing.T, e *env) {
				must(t, e.install(nil, actionOpts{}))
				must(t, e.upgrade(nil, actionOpts{}))
			},
			run: func(e *env, d driver.Driver) error {
				return e.rollback(d, actionOpts{afterHooks: true, maxHistory: 2, toVersion: 1})
			},
			pending:            "v2=deployed v3=pending-rollback",
			committed:          "v2=superseded v3=deployed",
			supersededAtCommit: []int{2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newMemEnv()
			tt.setup(t, e)
			wrapped, held := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
			must(t, tt.run(e, wrapped))
			if got := statuses(t, e.d); got != tt.pending {
				t.Fatalf("after the action: %s, want %s", got, tt.pending)
			}
			if tt.second != nil {
				if _, err := held.Fail(context.Background(), e.d, "not ready"); err != nil {
					t.Fatal(err)
				}
				wrapped, held = Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
				must(t, tt.second(e, wrapped))
				if got := statuses(t, e.d); got != tt.secondPending {
					t.Fatalf("after the second action: %s, want %s", got, tt.secondPending)
				}
			}
			if got := supersededOf(held); !slices.Equal(got, tt.supersededAtCommit) {
				t.Errorf("Superseded() = %v, want %v", got, tt.supersededAtCommit)
			}
			if _, err := held.Commit(context.Background(), e.d); err != nil {
				t.Fatal(err)
			}
			if got := statuses(t, e.d); got != tt.committed {
				t.Errorf("after Commit: %s, want %s", got, tt.committed)
			}
		})
	}
}

// The safety net: while held, a deferred revision that is still deployed
// cannot be deleted through the wrapper.
func TestWrapProtectsDeferredDeployedRevision(t *testing.T) {
	e := newMemEnv()
	must(t, e.install(nil, actionOpts{}))
	wrapped, held := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
	must(t, e.upgrade(wrapped, actionOpts{afterHooks: true}))
	if _, err := wrapped.Delete(releaseKey(relName, 1)); !errors.Is(err, ErrProtected) {
		t.Fatalf("Delete(v1) while held: %v, want ErrProtected", err)
	}
	if _, err := held.Commit(context.Background(), e.d); err != nil {
		t.Fatal(err)
	}
	if _, err := wrapped.Delete(releaseKey(relName, 1)); err != nil {
		t.Fatalf("Delete(v1) after Commit: %v", err)
	}
}

func TestCommitAndFailRefuseChangedStorage(t *testing.T) {
	for _, outcome := range []string{"commit", "fail"} {
		t.Run(outcome, func(t *testing.T) {
			e := newMemEnv()
			wrapped, held := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
			must(t, e.install(wrapped, actionOpts{afterHooks: true}))
			// Someone (an unlock) marks the pending revision failed.
			rel := mustGet(t, e.d, 1)
			rel.Info.Status = rcommon.StatusFailed
			must(t, e.d.Update(releaseKey(relName, 1), rel))
			var err error
			if outcome == "commit" {
				_, err = held.Commit(context.Background(), e.d)
			} else {
				_, err = held.Fail(context.Background(), e.d, "x")
			}
			if !errors.Is(err, ErrChanged) {
				t.Fatalf("%s: %v, want ErrChanged", outcome, err)
			}
			if got := statuses(t, e.d); got != "v1=failed" {
				t.Errorf("storage changed: %s", got)
			}
		})
	}
}

// An explicit Target.Version binds only that revision.
func TestWrapExplicitVersion(t *testing.T) {
	e := newMemEnv()
	must(t, e.install(nil, actionOpts{}))
	wrapped, held := Wrap(e.d, Target{Name: relName, Version: 2, Timeout: waitLimit, Now: clock})
	must(t, e.upgrade(wrapped, actionOpts{afterHooks: true}))
	if !held.Holding() || held.Version() != 2 {
		t.Fatalf("Holding=%v Version=%d", held.Holding(), held.Version())
	}

	e = newMemEnv()
	must(t, e.install(nil, actionOpts{}))
	wrapped, held = Wrap(e.d, Target{Name: relName, Version: 7, Timeout: waitLimit, Now: clock})
	must(t, e.upgrade(wrapped, actionOpts{afterHooks: true}))
	if held.Holding() {
		t.Fatal("held a revision that is not the target")
	}
	// Not the target: Helm's writes went through, supersede included.
	if got := statuses(t, e.d); got != "v1=superseded v2=deployed" {
		t.Errorf("got %s", got)
	}
}

func TestFailureDescriptionIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxDescriptionLength)
	d := failureDescription(rcommon.StatusPendingInstall, relName, long)
	if len(d) > MaxDescriptionLength || !strings.HasSuffix(d, " ...") || !strings.HasPrefix(d, `Release "app" failed: é`) {
		t.Errorf("len %d, %q...%q", len(d), d[:30], d[len(d)-10:])
	}
	if d := failureDescription(rcommon.StatusPendingUpgrade, relName, "x"); d != `Upgrade "app" failed: x` {
		t.Errorf("upgrade: %q", d)
	}
	if d := failureDescription(rcommon.StatusPendingRollback, relName, "x"); d != `Release "app" failed: x` {
		t.Errorf("rollback: %q", d)
	}
}

// A controller stopping (SIGTERM) cancels Helm's context. When that comes
// just after Helm finished the action (post hooks done, the deployed
// record held pending by the wrapper), Helm's context watcher still fails
// the revision: "Release "app" failed: context canceled". The interruption
// is the controller's, not the release's: the revision stays pending with
// its deadline, as an interrupted readiness wait leaves it, and the next
// run resumes the wait (e2e TestGoBackToUpstream/sigterm saw v1 failed).
// Any other failure Helm writes after the hold passes through.
func TestCanceledContextAfterTheHoldKeepsItPending(t *testing.T) {
	tests := []struct {
		description string
		want        string
		holding     bool
	}{
		{description: `Release "app" failed: context canceled`, want: "v1=pending-install", holding: true},
		{description: `Release "app" failed: context deadline exceeded`, want: "v1=failed"},
		{description: `Release "app" failed: post-install hooks failed`, want: "v1=failed"},
	}
	for _, tt := range tests {
		t.Run(tt.description, func(t *testing.T) {
			e, _ := newSecretsEnv()
			d, held := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock})
			rel := &releasev1.Release{Name: relName, Namespace: "default", Version: 1,
				Info: &releasev1.Info{Status: rcommon.StatusPendingInstall, Description: "Initial install underway"}}
			key := releaseKey(relName, 1)
			must(t, d.Create(key, cloneRelease(rel)))
			rel.Info.Status, rel.Info.Description = rcommon.StatusDeployed, "Install complete"
			must(t, d.Update(key, cloneRelease(rel)))
			rel.Info.Status, rel.Info.Description = rcommon.StatusFailed, tt.description
			must(t, d.Update(key, cloneRelease(rel)))

			if got := statuses(t, e.d); got != tt.want {
				t.Errorf("storage %s, want %s", got, tt.want)
			}
			if held.Holding() != tt.holding {
				t.Errorf("Holding = %v, want %v", held.Holding(), tt.holding)
			}
			if !tt.holding {
				return
			}
			if _, err := Recover(e.d, relName); err != nil {
				t.Errorf("the next run cannot resume the wait: %v", err)
			}
		})
	}
}
