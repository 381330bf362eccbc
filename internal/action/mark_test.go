package action

import (
	"context"
	"testing"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// Every revision an install, upgrade or rollback of the controller creates
// is stored with the mark its call carries, whatever Helm copied into it
// (an upgrade the previous revision's labels, a rollback the target's); a
// revision made with Helm's own upgrade, as the helm CLI does, carries
// only a copy, which does not mark it.
func TestActionsMarkTheirRevision(t *testing.T) {
	ctx := context.Background()
	cfg := newFakeConfig(t, "flux", nil)
	obj := newHR()
	name := v2.ReleaseName(obj)
	marked := func(c Call, after string) (Call, ownrevision.Mark) {
		m := ownrevision.Mark{Owner: "uid-1", After: after}
		c.Mark = &m
		return c, m
	}
	wantMarked := func(t *testing.T, m ownrevision.Mark, version int) {
		t.Helper()
		rel, err := LastRelease(cfg, name)
		if err != nil {
			t.Fatal(err)
		}
		if rel.Version != version || !m.Marks(rel) {
			t.Fatalf("latest revision v%d with labels %v, want v%d marked %s", rel.Version, rel.Labels, version, m.Value(version))
		}
	}

	c, install := marked(planned(t, nil, obj, plan.Install, asked{}), "")
	if _, err := Install(ctx, cfg, obj, testChart("1.0.0"), map[string]any{"foo": "one"}, c); err != nil {
		t.Fatalf("install: %v", err)
	}
	wantMarked(t, install, 1)

	c, upgrade := marked(planned(t, cfg, obj, plan.Upgrade, asked{}), "sha256:v1")
	if _, err := Upgrade(ctx, cfg, obj, testChart("1.1.0"), map[string]any{"foo": "two"}, c); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	wantMarked(t, upgrade, 2)

	c, rollback := marked(planned(t, cfg, obj, plan.Rollback, asked{toVersion: 1}), "sha256:v2")
	if err := Rollback(ctx, cfg, obj, 1, c); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	wantMarked(t, rollback, 3)
	// The revision rolled back to keeps its own mark.
	first, err := cfg.Releases.Get(name, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rel := first.(*releasev1.Release); !install.Marks(rel) {
		t.Errorf("v1 labels %v after the rollback, want its install mark", rel.Labels)
	}

	// helm upgrade by hand: Helm's action with no mark of ours.
	byHand := helmaction.NewUpgrade(cfg)
	byHand.Namespace = obj.GetReleaseNamespace()
	rel, err := byHand.RunWithContext(ctx, name, testChart("1.1.0"), map[string]any{"foo": "two"})
	if err != nil {
		t.Fatalf("upgrade by hand: %v", err)
	}
	v4 := rel.(*releasev1.Release)
	if v4.Labels[ownrevision.Label] == "" {
		t.Fatalf("v4 labels %v: Helm copied no label, the case this test is about", v4.Labels)
	}
	for _, m := range []ownrevision.Mark{install, upgrade, rollback, {Owner: "uid-1", After: "sha256:v3"}} {
		if m.Marks(v4) {
			t.Errorf("the revision made by hand (labels %v) passes for the controller's (%+v)", v4.Labels, m)
		}
	}
}
