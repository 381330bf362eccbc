package afterhooks

import (
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

func TestRunningHook(t *testing.T) {
	hook := func(name string, weight int, phase releasev1.HookPhase, events ...releasev1.HookEvent) *releasev1.Hook {
		return &releasev1.Hook{Name: name, Kind: "Job", Weight: weight, Events: events, LastRun: releasev1.HookExecution{Phase: phase}}
	}
	cases := []struct {
		name    string
		pending common.Status
		hooks   []*releasev1.Hook
		want    string
		found   bool
	}{
		{name: "no hook running", pending: common.StatusPendingInstall,
			hooks: []*releasev1.Hook{hook("a", 0, releasev1.HookPhaseSucceeded, releasev1.HookPostInstall)}},
		{name: "second post-install hook by weight", pending: common.StatusPendingInstall, found: true,
			hooks: []*releasev1.Hook{
				hook("z-first", -5, releasev1.HookPhaseSucceeded, releasev1.HookPostInstall),
				hook("a-second", 0, releasev1.HookPhaseRunning, releasev1.HookPostInstall),
				hook("pre", 0, releasev1.HookPhaseSucceeded, releasev1.HookPreInstall),
			},
			want: "running post-install hooks 2/2: job/a-second"},
		{name: "pre-upgrade hook", pending: common.StatusPendingUpgrade, found: true,
			hooks: []*releasev1.Hook{hook("migrate", 0, releasev1.HookPhaseRunning, releasev1.HookPreUpgrade, releasev1.HookPreInstall)},
			want:  "running pre-upgrade hooks 1/1: job/migrate"},
		{name: "test hook is not an action hook", pending: common.StatusPendingInstall,
			hooks: []*releasev1.Hook{hook("smoke", 0, releasev1.HookPhaseRunning, releasev1.HookTest)}},
		{name: "deployed release", pending: common.StatusDeployed,
			hooks: []*releasev1.Hook{hook("a", 0, releasev1.HookPhaseRunning, releasev1.HookPostInstall)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := runningHook(&releasev1.Release{Hooks: tc.hooks}, tc.pending)
			if ok != tc.found {
				t.Fatalf("found %v (%v), want %v", ok, p, tc.found)
			}
			if ok && p.String() != tc.want {
				t.Fatalf("%q, want %q", p.String(), tc.want)
			}
		})
	}
}

// Helm runs the hooks of an event by weight, then by name; hooks of other
// events and nil entries are not among them.
func TestHooksInRunOrder(t *testing.T) {
	hook := func(name string, weight int, events ...releasev1.HookEvent) *releasev1.Hook {
		return &releasev1.Hook{Name: name, Weight: weight, Events: events}
	}
	cases := []struct {
		name  string
		hooks []*releasev1.Hook
		want  []string
	}{
		{name: "none"},
		{name: "lower weight first", want: []string{"b", "a"},
			hooks: []*releasev1.Hook{hook("a", 5, releasev1.HookPostInstall), hook("b", -5, releasev1.HookPostInstall)}},
		{name: "same weight by name", want: []string{"a", "b", "c"},
			hooks: []*releasev1.Hook{hook("c", 1, releasev1.HookPostInstall), hook("a", 1, releasev1.HookPostInstall), hook("b", 1, releasev1.HookPostInstall)}},
		{name: "other events and nil left out", want: []string{"both"},
			hooks: []*releasev1.Hook{nil, hook("pre", 0, releasev1.HookPreInstall), hook("both", 0, releasev1.HookPreInstall, releasev1.HookPostInstall)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, h := range HooksInRunOrder(tc.hooks, releasev1.HookPostInstall) {
				got = append(got, h.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
		})
	}
}

// A real install through the wrapper reports each hook it starts.
func TestWrapReportsHookProgress(t *testing.T) {
	e := newMemEnv()
	reports := make(chan HookProgress, 16)
	wrapped, _ := Wrap(e.d, Target{Name: relName, Timeout: waitLimit, Now: clock,
		OnHookStarted: func(p HookProgress) { reports <- p }})
	must(t, e.install(wrapped, actionOpts{afterHooks: true}))
	select {
	case p := <-reports:
		if p.Total < 1 || p.Index < 1 || p.Name == "" || !strings.HasPrefix(p.Event, "post-install") && !strings.HasPrefix(p.Event, "pre-install") {
			t.Fatalf("progress %+v", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hook progress reported")
	}
}
