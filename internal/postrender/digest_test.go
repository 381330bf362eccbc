package postrender

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
)

// The expected digests were computed outside Go (Python's json.dumps with
// compact separators, a trailing newline, SHA-256), which is the encoding
// upstream helm-controller hashes; a change here means releases made by
// upstream would be upgraded on adoption.
func TestDigestsKnownValues(t *testing.T) {
	renderers := []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{
		Patches: []kustomize.Patch{{
			Patch:  "- op: add\n  path: /metadata/labels/team\n  value: blue\n",
			Target: &kustomize.Selector{Kind: "Deployment", Name: "podinfo"},
		}},
		Images: []kustomize.Image{{Name: "ghcr.io/stefanprodan/podinfo", NewTag: "6.9.0"}},
	}}}
	md := &helmv2.CommonMetadata{
		Labels:      map[string]string{"tier": "web", "env": "prod"},
		Annotations: map[string]string{"owner": "team-a"},
	}
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"post renderers", PostRenderersDigest(renderers), "sha256:108c6934ecafef036a5168020526e0e751323643b808bab889e02043ba0aa878"},
		{"empty post renderer list", PostRenderersDigest([]helmv2.PostRenderer{}), "sha256:37517e5f3dc66819f61f5a7bb8ace1921282415f10551d2defa5c3eb0985b570"},
		{"no post renderers", PostRenderersDigest(nil), ""},
		{"common metadata", CommonMetadataDigest(md), "sha256:007543fb61fd4d66a5a2d939134fb0d218d9d61d958715cae29cbd8448034ae6"},
		{"no common metadata", CommonMetadataDigest(nil), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("digest = %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestDigestsStability(t *testing.T) {
	base := func() []helmv2.PostRenderer {
		return []helmv2.PostRenderer{
			{Kustomize: &helmv2.Kustomize{Images: []kustomize.Image{{Name: "a", NewTag: "1"}}}},
			{Kustomize: &helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "kind: X"}}}},
		}
	}
	d := PostRenderersDigest(base())
	for i := 0; i < 20; i++ {
		if again := PostRenderersDigest(base()); again != d {
			t.Fatalf("digest changed between runs: %s, then %s", d, again)
		}
	}
	changes := map[string]func([]helmv2.PostRenderer) []helmv2.PostRenderer{
		"tag": func(p []helmv2.PostRenderer) []helmv2.PostRenderer {
			p[0].Kustomize.Images[0].NewTag = "2"
			return p
		},
		"order": func(p []helmv2.PostRenderer) []helmv2.PostRenderer { return []helmv2.PostRenderer{p[1], p[0]} },
		"patch": func(p []helmv2.PostRenderer) []helmv2.PostRenderer {
			p[1].Kustomize.Patches[0].Patch = "kind: Y"
			return p
		},
		"target": func(p []helmv2.PostRenderer) []helmv2.PostRenderer {
			p[1].Kustomize.Patches[0].Target = &kustomize.Selector{Kind: "X"}
			return p
		},
	}
	for name, change := range changes {
		if PostRenderersDigest(change(base())) == d {
			t.Errorf("changing the %s leaves the digest as it was", name)
		}
	}

	// Map order must not matter, key and value changes must.
	md1 := &helmv2.CommonMetadata{Labels: map[string]string{"a": "1", "b": "2", "c": "3"}}
	md2 := &helmv2.CommonMetadata{Labels: map[string]string{"c": "3", "b": "2", "a": "1"}}
	if CommonMetadataDigest(md1) != CommonMetadataDigest(md2) {
		t.Error("label order changes the common metadata digest")
	}
	if CommonMetadataDigest(md1) == CommonMetadataDigest(&helmv2.CommonMetadata{Labels: map[string]string{"a": "1"}}) {
		t.Error("removing labels leaves the common metadata digest as it was")
	}
	if CommonMetadataDigest(md1) == CommonMetadataDigest(&helmv2.CommonMetadata{Annotations: md1.Labels}) {
		t.Error("labels and annotations with the same content have the same digest")
	}
}
