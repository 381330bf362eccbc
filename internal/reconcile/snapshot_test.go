package reconcile

import (
	"testing"
	"time"

	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

func TestReleaseDigest(t *testing.T) {
	base := func() *releasev1.Release {
		return &releasev1.Release{
			Name: "app", Namespace: "default", Version: 2, Manifest: "kind: ConfigMap",
			Config: map[string]any{"a": 1},
			Chart:  &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "app", Version: "1.0.0"}},
			Info:   &releasev1.Info{Status: common.StatusDeployed, LastDeployed: time.Unix(100, 0)},
			Hooks:  []*releasev1.Hook{{Name: "migrate", Events: []releasev1.HookEvent{releasev1.HookPostInstall}}},
		}
	}
	ref := releaseDigest(base(), "").String()
	if len(ref) != len("sha256:")+64 {
		t.Fatalf("digest %q is not a sha256 digest", ref)
	}
	cases := []struct {
		name   string
		change func(*releasev1.Release)
		same   bool
	}{
		{"identical", func(*releasev1.Release) {}, true},
		{"test hook added", func(r *releasev1.Release) {
			r.Hooks = append(r.Hooks, &releasev1.Hook{Name: "smoke", Events: []releasev1.HookEvent{releasev1.HookTest},
				LastRun: releasev1.HookExecution{Phase: releasev1.HookPhaseSucceeded}})
		}, true},
		{"chart files ignored", func(r *releasev1.Release) { r.Chart.Templates = nil; r.Chart.Values = map[string]any{"x": 1} }, true},
		{"status", func(r *releasev1.Release) { r.Info.Status = common.StatusSuperseded }, false},
		{"values", func(r *releasev1.Release) { r.Config["a"] = 2 }, false},
		{"manifest", func(r *releasev1.Release) { r.Manifest += "\n---" }, false},
		{"chart version", func(r *releasev1.Release) { r.Chart.Metadata.Version = "1.0.1" }, false},
		{"non-test hook run", func(r *releasev1.Release) { r.Hooks[0].LastRun.Phase = releasev1.HookPhaseSucceeded }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rel := base()
			tc.change(rel)
			if got := releaseDigest(rel, "").String(); (got == ref) != tc.same {
				t.Fatalf("digest %s vs %s, want same=%v", got, ref, tc.same)
			}
		})
	}
	if releaseDigest(base(), "sha256:abc") == releaseDigest(base(), "") {
		t.Error("the OCI digest does not change the release digest")
	}
}
