package reconcile

import (
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/opencontainers/go-digest"

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
	ref := releaseDigest(digest.SHA256, base(), "").String()
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
			if got := releaseDigest(digest.SHA256, rel, "").String(); (got == ref) != tc.same {
				t.Fatalf("digest %s vs %s, want same=%v", got, ref, tc.same)
			}
		})
	}
	if releaseDigest(digest.SHA256, base(), "sha256:abc") == releaseDigest(digest.SHA256, base(), "") {
		t.Error("the OCI digest does not change the release digest")
	}
}

// goldenRelease is a release whose digests were recorded before the digest
// algorithm became configurable; takeover of releases written by upstream
// helm-controller depends on sha256 digests staying byte-identical.
func goldenRelease() *releasev1.Release {
	return &releasev1.Release{
		Name: "app", Namespace: "default", Version: 2, Manifest: "kind: ConfigMap",
		Config: map[string]any{"a": 1},
		Chart:  &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "app", Version: "1.0.0"}},
		Info:   &releasev1.Info{Status: common.StatusDeployed, LastDeployed: time.Unix(100, 0).UTC()},
		Hooks:  []*releasev1.Hook{{Name: "migrate", Events: []releasev1.HookEvent{releasev1.HookPostInstall}}},
	}
}

func TestSnapshotDigestAlgorithm(t *testing.T) {
	const (
		goldenDigest       = "sha256:6ba9dc390c57f0ecde4570631a6f0c84dd0f23fa948ea8f194d390e21e5fe8f5"
		goldenConfigDigest = "sha256:37b128c59f1f5097f73f82691cb519f1f568667faab5ced1b4ab979d36837eae"
	)
	tests := []struct {
		algo       digest.Algorithm
		wantPrefix string
		hexLen     int
	}{
		{"", "sha256:", 64}, // unset: upstream's default
		{digest.SHA256, "sha256:", 64},
		{digest.SHA384, "sha384:", 96},
		{digest.SHA512, "sha512:", 128},
	}
	for _, tt := range tests {
		t.Run(string(tt.algo), func(t *testing.T) {
			req := &Request{DigestAlgorithm: tt.algo}
			s := newSnapshot(req, goldenRelease(), helmv2.ReleaseActionInstall)
			for field, d := range map[string]string{"digest": s.Digest, "configDigest": s.ConfigDigest} {
				if !strings.HasPrefix(d, tt.wantPrefix) || len(d) != len(tt.wantPrefix)+tt.hexLen {
					t.Errorf("%s %q, want a %s digest", field, d, tt.wantPrefix)
				}
				if err := digest.Digest(d).Validate(); err != nil {
					t.Errorf("%s %q does not validate: %v", field, d, err)
				}
			}
			if tt.wantPrefix == "sha256:" && (s.Digest != goldenDigest || s.ConfigDigest != goldenConfigDigest) {
				t.Errorf("sha256 digests changed:\n digest       %s, want %s\n configDigest %s, want %s",
					s.Digest, goldenDigest, s.ConfigDigest, goldenConfigDigest)
			}
		})
	}
}

// A history written with one algorithm stays in sync after a switch to
// another: the values are compared by content, not by digest string.
func TestValuesMatchAcrossAlgorithms(t *testing.T) {
	values := map[string]any{"a": 1}
	sha256Digest := "sha256:37b128c59f1f5097f73f82691cb519f1f568667faab5ced1b4ab979d36837eae"
	req := &Request{Values: values, DigestAlgorithm: digest.SHA512}
	req.ConfigDigest = digest.SHA512.FromString("placeholder").String() // any sha512 digest other than the recorded one
	tests := []struct {
		name     string
		recorded string
		want     bool
	}{
		{"same string", req.ConfigDigest, true},
		{"sha256 of the same values", sha256Digest, true},
		{"sha256 of other values", digest.SHA256.FromString("other").String(), false},
		{"other sha512", digest.SHA512.FromString("other").String(), false},
		{"empty", "", false},
		{"garbage", "md5:abc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := req.valuesMatch(tt.recorded); got != tt.want {
				t.Errorf("valuesMatch(%q) = %v, want %v", tt.recorded, got, tt.want)
			}
		})
	}
}
