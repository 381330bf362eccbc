package dist

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestBuildValidate(t *testing.T) {
	ok := Build{Root: ".", WorkDir: t.TempDir(), Version: "v0.1.0", Revision: "abc", Created: time.Unix(1, 0)}
	tests := []struct {
		name    string
		change  func(*Build)
		wantErr string
	}{
		{"complete", func(*Build) {}, ""},
		{"dev version", func(b *Build) { b.Version = "v0.1.0-dev.0123456789ab-dirty" }, ""},
		{"latest", func(b *Build) { b.Version = "latest" }, "other than"},
		{"no version", func(b *Build) { b.Version = "" }, "other than"},
		{"not a tag", func(b *Build) { b.Version = "v0.1.0+build" }, "not a valid image tag"},
		{"no revision", func(b *Build) { b.Revision = "" }, "revision"},
		{"no time", func(b *Build) { b.Created = time.Time{} }, "creation time"},
		{"no work dir", func(b *Build) { b.WorkDir = "" }, "work directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := ok
			tt.change(&b)
			err := b.validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("validate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	b := Build{Version: "v0.1.0", Revision: "0123abcd", Created: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	want := map[string]string{
		"org.opencontainers.image.source":   SourceURL,
		"org.opencontainers.image.version":  "v0.1.0",
		"org.opencontainers.image.revision": "0123abcd",
		"org.opencontainers.image.created":  "2026-11-24T10:00:00Z",
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	got := b.Labels()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
}

// Push sends the whole index to a registry; the registry here is
// go-containerregistry's in-memory one on 127.0.0.1.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	want, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}

	ref, err := Push(context.Background(), idx, host+"/afterhooks/helm-controller:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("reading back %s: %v", ref, err)
	}
	if d, _ := got.Digest(); d != want {
		t.Errorf("the registry serves %s, pushed %s", d, want)
	}
	m, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range m.Manifests {
		img, err := remote.Image(ref.Context().Digest(desc.Digest.String()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := img.RawConfigFile(); err != nil {
			t.Errorf("manifest %s was not pushed whole: %v", desc.Digest, err)
		}
	}

	if _, err := Push(context.Background(), idx, host+"/afterhooks/helm-controller:latest"); err == nil {
		t.Errorf("pushing :latest was accepted")
	}
	if _, err := name.ParseReference(host + "/x:bad tag"); err == nil {
		t.Fatal("the reference parser accepts spaces; the next check proves nothing")
	}
	if _, err := Push(context.Background(), idx, host+"/x:bad tag"); err == nil {
		t.Errorf("an invalid reference was accepted")
	}
}

// GitBuild works outside a git checkout (a source archive, a copy), as
// hack/version.sh does.
func TestGitBuildOutsideGit(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "hack"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("..", "..", "version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hack", "version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	b, err := GitBuild(dir, "")
	if err != nil {
		t.Fatalf("GitBuild outside git: %v", err)
	}
	if b.Version != "v0.1.0-dev" || b.Revision != UnknownRevision || b.Created.Unix() != 0 {
		t.Errorf("got version %q revision %q created %s; want v0.1.0-dev, %s, the epoch", b.Version, b.Revision, b.Created, UnknownRevision)
	}
	b.WorkDir = dir
	if err := b.validate(); err != nil {
		t.Errorf("the fallback build does not validate: %v", err)
	}
}
