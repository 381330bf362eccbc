package plan

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// The apply method every install, upgrade and rollback plan carries, for
// each state of the UseHelm3Defaults gate, each serverSideApply the spec
// can say (or not) and each apply method the stored revision the action
// starts from can have (none read: nil). The expectations are Helm's: an
// install applies server-side unless told otherwise or under Helm 3's
// defaults; an upgrade's or rollback's auto follows the stored revision
// ("ssa" only), whatever the gate, and enabled/disabled ignore it.
func TestApply(t *testing.T) {
	revisions := map[string]*releasev1.Release{
		"none":  nil,
		"ssa":   {Version: 1, ApplyMethod: string(releasev1.ApplyMethodServerSideApply)},
		"csa":   {Version: 1, ApplyMethod: string(releasev1.ApplyMethodClientSideApply)},
		"helm3": {Version: 1}, // Helm 3 recorded no method
	}
	for _, gate := range []bool{false, true} {
		// Install: spec.install.serverSideApply, else the gate.
		for _, spec := range []*bool{nil, new(true), new(false)} {
			want := Apply{ServerSide: !gate}
			if spec != nil {
				want.ServerSide = *spec
			}
			obj := &v2.HelmRelease{Spec: v2.HelmReleaseSpec{Install: &v2.Install{Install: helmv2.Install{ServerSideApply: spec}}}}
			for name, rel := range revisions {
				// An install starts from no revision: one in storage
				// changes nothing.
				p := New(obj, Install, Settings{Helm3Defaults: gate}).Upgrading(rel)
				if p.Apply == nil || *p.Apply != want {
					t.Errorf("install, gate %t, spec %v, stored %s: apply %+v, want %+v", gate, ptrString(spec), name, p.Apply, want)
				}
			}
		}
		// Upgrade and rollback: enabled/disabled, else Helm's auto.
		modes := []helmv2.ServerSideApplyMode{"", helmv2.ServerSideApplyAuto, helmv2.ServerSideApplyEnabled, helmv2.ServerSideApplyDisabled}
		for _, mode := range modes {
			for name, rel := range revisions {
				want := Apply{ServerSide: mode == helmv2.ServerSideApplyEnabled}
				if mode == "" || mode == helmv2.ServerSideApplyAuto {
					want = Apply{Auto: true, ServerSide: name == "ssa"}
				}
				obj := &v2.HelmRelease{Spec: v2.HelmReleaseSpec{
					Upgrade:  &v2.Upgrade{Upgrade: helmv2.Upgrade{ServerSideApply: mode}},
					Rollback: &v2.Rollback{Rollback: helmv2.Rollback{ServerSideApply: mode}},
				}}
				upgrade := New(obj, Upgrade, Settings{Helm3Defaults: gate}).Upgrading(rel)
				if upgrade.Apply == nil || *upgrade.Apply != want {
					t.Errorf("upgrade, gate %t, mode %q, last %s: apply %+v, want %+v", gate, mode, name, upgrade.Apply, want)
				}
				rollback, err := New(obj, Rollback, Settings{Helm3Defaults: gate}).Follow(rel)
				if err != nil {
					t.Fatal(err)
				}
				if rollback.Apply == nil || *rollback.Apply != want {
					t.Errorf("rollback, gate %t, mode %q, target %s: apply %+v, want %+v", gate, mode, name, rollback.Apply, want)
				}
			}
		}
	}
}

// Only the verb that starts from a revision reads it: Follow leaves an
// upgrade's apply alone and Upgrading a rollback's; neither changes the
// plan it was called on; uninstall and test have no apply at all.
func TestApplyFollowsOnlyItsOwnRevision(t *testing.T) {
	ssa := &releasev1.Release{Version: 2, ApplyMethod: "ssa"}
	obj := &v2.HelmRelease{}
	upgrade := New(obj, Upgrade, Settings{})
	if followed, _ := upgrade.Follow(ssa); followed.Apply.ServerSide {
		t.Error("Follow resolved an upgrade's auto")
	}
	rollback := New(obj, Rollback, Settings{})
	if p := rollback.Upgrading(ssa); p.Apply.ServerSide {
		t.Error("Upgrading resolved a rollback's auto")
	}
	if p := upgrade.Upgrading(ssa); !p.Apply.ServerSide || upgrade.Apply.ServerSide {
		t.Errorf("upgrading an ssa revision: %+v, the plan it came from %+v", p.Apply, upgrade.Apply)
	}
	for _, v := range []Verb{Uninstall, Test} {
		if p := New(obj, v, Settings{}); p.Apply != nil || p.PostRenderStrategy != "" {
			t.Errorf("%s: apply %+v, post-render strategy %q", v, p.Apply, p.PostRenderStrategy)
		}
	}
}

// The post-render strategy of an install or upgrade: the spec's, else
// "nohooks" under Helm 3's defaults, else "combined"; a rollback renders
// nothing (it re-applies a stored manifest) and has none.
func TestPostRenderStrategy(t *testing.T) {
	tests := []struct {
		spec helmv2.PostRenderStrategy
		gate bool
		want helmv2.PostRenderStrategy
	}{
		{spec: "", gate: false, want: helmv2.PostRenderStrategyCombined},
		{spec: "", gate: true, want: helmv2.PostRenderStrategyNoHooks},
		{spec: helmv2.PostRenderStrategySeparate, gate: true, want: helmv2.PostRenderStrategySeparate},
		{spec: helmv2.PostRenderStrategyCombined, gate: true, want: helmv2.PostRenderStrategyCombined},
		{spec: helmv2.PostRenderStrategyNoHooks, gate: false, want: helmv2.PostRenderStrategyNoHooks},
		// Kept for the action to refuse.
		{spec: "bogus", gate: true, want: "bogus"},
	}
	for _, tt := range tests {
		obj := &v2.HelmRelease{}
		obj.Spec.PostRenderStrategy = tt.spec
		for _, v := range []Verb{Install, Upgrade} {
			if got := New(obj, v, Settings{Helm3Defaults: tt.gate}).PostRenderStrategy; got != tt.want {
				t.Errorf("%s, spec %q, gate %t: %q, want %q", v, tt.spec, tt.gate, got, tt.want)
			}
		}
		if got := New(obj, Rollback, Settings{Helm3Defaults: tt.gate}).PostRenderStrategy; got != "" {
			t.Errorf("rollback, spec %q: %q", tt.spec, got)
		}
	}
}

func ptrString(b *bool) string {
	if b == nil {
		return "unset"
	}
	if *b {
		return "true"
	}
	return "false"
}
