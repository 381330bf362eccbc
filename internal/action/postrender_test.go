package action

import (
	"context"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/postrender"
)

// TestPostRenderStrategyHooks runs install and upgrade through Helm with
// the controller's post renderer and checks where spec.postRenderStrategy
// lets it reach: the release's resources always, its hooks (post-install
// and the tests) only with combined and separate.
func TestPostRenderStrategyHooks(t *testing.T) {
	cases := []struct {
		name          string
		strategy      helmv2.PostRenderStrategy
		helm3Defaults bool
		wantHooks     bool
	}{
		{name: "default is combined", wantHooks: true},
		{name: "default with UseHelm3Defaults is nohooks", helm3Defaults: true, wantHooks: false},
		{name: "combined", strategy: helmv2.PostRenderStrategyCombined, wantHooks: true},
		{name: "separate", strategy: helmv2.PostRenderStrategySeparate, wantHooks: true},
		{name: "nohooks", strategy: helmv2.PostRenderStrategyNoHooks, wantHooks: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := newHR(func(o *v2.HelmRelease) {
				o.Spec.PostRenderStrategy = tc.strategy
				o.Spec.CommonMetadata = &helmv2.CommonMetadata{Labels: map[string]string{"team": "blue"}}
			})
			pr, err := postrender.Build(&obj.Spec.HelmReleaseSpec, obj.Name, obj.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			opts := asked{config: Config{UseHelm3Defaults: tc.helm3Defaults}, postRenderer: pr}
			// Server-side apply needs a real API server; the printing
			// client only accepts client-side apply.
			obj.Spec.Install = &v2.Install{Install: helmv2.Install{ServerSideApply: ptr(false)}}
			obj.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{ServerSideApply: helmv2.ServerSideApplyDisabled}}
			cfg := newFakeConfig(t, "flux", nil)

			rel, err := Install(context.Background(), cfg, obj, testChart("1.0.0"), nil, planned(t, nil, obj, plan.Install, opts))
			if err != nil {
				t.Fatalf("install: %v", err)
			}
			checkPostRendered(t, "install", rel.Manifest, hookManifests(rel.Hooks), tc.wantHooks)

			rel, err = Upgrade(context.Background(), cfg, obj, testChart("1.0.1"), nil, planned(t, cfg, obj, plan.Upgrade, opts))
			if err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			checkPostRendered(t, "upgrade", rel.Manifest, hookManifests(rel.Hooks), tc.wantHooks)
		})
	}
}

func hookManifests(hooks []*releasev1.Hook) []string {
	var out []string
	for _, h := range hooks {
		out = append(out, h.Manifest)
	}
	return out
}

func checkPostRendered(t *testing.T, verb, manifest string, hooks []string, wantHooks bool) {
	t.Helper()
	if !strings.Contains(manifest, "team: blue") || !strings.Contains(manifest, "helm.toolkit.fluxcd.io/name: app") {
		t.Errorf("%s: resources not post-rendered:\n%s", verb, manifest)
	}
	if strings.Contains(manifest, "postrenderer.helm.sh") {
		t.Errorf("%s: Helm's filename annotation left in the manifest:\n%s", verb, manifest)
	}
	if len(hooks) != 3 {
		t.Fatalf("%s: %d hooks, want 3", verb, len(hooks))
	}
	for _, h := range hooks {
		if got := strings.Contains(h, "team: blue"); got != wantHooks {
			t.Errorf("%s: hook post-rendered = %v, want %v:\n%s", verb, got, wantHooks, h)
		}
	}
}

// A post renderer that fails stops the install before Helm stores or
// applies anything.
func TestFailingPostRendererStopsInstall(t *testing.T) {
	obj := newHR(func(o *v2.HelmRelease) {
		o.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{{
			Patch:  "- op: replace\n  path: /spec/does/not/exist\n  value: 1\n",
			Target: &kustomize.Selector{Kind: "ConfigMap"},
		}}}}}
	})
	pr, err := postrender.Build(&obj.Spec.HelmReleaseSpec, obj.Name, obj.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	cfg := newFakeConfig(t, "flux", nil)
	_, err = Install(context.Background(), cfg, obj, testChart("1.0.0"), nil, planned(t, nil, obj, plan.Install, asked{postRenderer: pr}))
	if err == nil || !strings.Contains(err.Error(), "spec.postRenderers[0].kustomize") {
		t.Fatalf("install error = %v, want the failing post renderer named", err)
	}
	if all, _ := cfg.Releases.ListReleases(); len(all) != 0 {
		t.Fatalf("%d releases stored after a failed post render", len(all))
	}
}

// A List template whose items share a value through a YAML anchor installs
// as it does without a post renderer: Helm 4 splits the List into
// documents before post-rendering, which the post renderer must survive.
func TestPostRenderListWithAnchors(t *testing.T) {
	const list = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: one
  data: &shared
    a: "1"
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: two
  data: *shared
`
	c := &chartv2.Chart{
		Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "demo", Version: "1.0.0"},
		Templates: []*common.File{{Name: "templates/list.yaml", Data: []byte(list)}},
	}
	obj := newHR(func(o *v2.HelmRelease) {
		o.Spec.Install = &v2.Install{Install: helmv2.Install{ServerSideApply: ptr(false)}}
	})
	pr, err := postrender.Build(&obj.Spec.HelmReleaseSpec, obj.Name, obj.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := Install(context.Background(), newFakeConfig(t, "flux", nil), obj, c, nil, planned(t, nil, obj, plan.Install, asked{postRenderer: pr}))
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	for _, name := range []string{"name: one", "name: two"} {
		if !strings.Contains(rel.Manifest, name) {
			t.Errorf("manifest lacks %s:\n%s", name, rel.Manifest)
		}
	}
	if strings.Count(rel.Manifest, `a: "1"`) != 2 || strings.Count(rel.Manifest, "helm.toolkit.fluxcd.io/name: app") != 2 {
		t.Errorf("aliases not inlined or objects not labelled:\n%s", rel.Manifest)
	}
}
