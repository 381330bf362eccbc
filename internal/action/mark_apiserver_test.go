package action

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// Against a real API server and Helm's record Secrets: the mark of each
// install, upgrade and rollback is a label of the Secret of the revision
// it created, under beforeHooks and under afterHooks (whose storage holds
// the deployed record back and writes it at the end of the readiness
// wait), and reads back with the release, where crash recovery looks.
func TestAgainstAPIServerRevisionsCarryTheirMark(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range []v2.HookWaitStrategy{v2.BeforeHooks, v2.AfterHooks} {
		t.Run(string(order), func(t *testing.T) {
			ns := "mark-" + map[v2.HookWaitStrategy]string{v2.BeforeHooks: "before", v2.AfterHooks: "after"}[order]
			createNamespaces(t, cs, ns)
			obj := newHR(func(o *v2.HelmRelease) { o.Name, o.Namespace = "marked", ns })
			name := v2.ReleaseName(obj)
			cfg, err := factory.Build(ns, ns, withLogger(testr.New(t)))
			if err != nil {
				t.Fatal(err)
			}
			opts := asked{hookOrder: order}
			wantMarked := func(t *testing.T, m ownrevision.Mark, version int) {
				t.Helper()
				secret, err := cs.CoreV1().Secrets(ns).Get(ctx, fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := secret.Labels[ownrevision.Label]; got != m.Value(version) {
					t.Errorf("v%d Secret label %s=%q, want %q", version, ownrevision.Label, got, m.Value(version))
				}
				rel, err := LastRelease(cfg, name)
				if err != nil {
					t.Fatal(err)
				}
				if rel.Version != version || rel.Info.Status.String() != "deployed" || !m.Marks(rel) {
					t.Errorf("read back v%d %s with labels %v, want v%d deployed and marked", rel.Version, rel.Info.Status, rel.Labels, version)
				}
			}

			install := ownrevision.Mark{Owner: "uid-" + ns}
			c := planned(t, nil, obj, plan.Install, opts)
			c.Mark = &install
			if _, err := Install(ctx, cfg, obj, cmChart("1.0.0"), map[string]any{"foo": "one"}, c); err != nil {
				t.Fatalf("install: %v", err)
			}
			wantMarked(t, install, 1)

			upgrade := ownrevision.Mark{Owner: install.Owner, After: "sha256:one"}
			c = planned(t, cfg, obj, plan.Upgrade, opts)
			c.Mark = &upgrade
			if _, err := Upgrade(ctx, cfg, obj, cmChart("1.1.0"), map[string]any{"foo": "two"}, c); err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			wantMarked(t, upgrade, 2)

			rollback := ownrevision.Mark{Owner: install.Owner, After: "sha256:two"}
			c = planned(t, cfg, obj, plan.Rollback, asked{hookOrder: order, toVersion: 1})
			c.Mark = &rollback
			if err := Rollback(ctx, cfg, obj, 1, c); err != nil {
				t.Fatalf("rollback: %v", err)
			}
			wantMarked(t, rollback, 3)
		})
	}
}
