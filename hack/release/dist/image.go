// Package dist builds what a release ships: the multi-platform container
// image (without a Docker daemon) and the release manifests. `make image`,
// `make image-push` and `make release-manifests` run it through
// hack/release; TestImage in test/e2e calls it directly, so both build the
// same thing.
package dist

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Repository is where releases are published; manifests refer to it.
	Repository = "ghcr.io/afterhooks/helm-controller"
	// SourceURL goes into the org.opencontainers.image.source label.
	SourceURL = "https://github.com/afterhooks/helm-controller"
	// BinaryPath is the controller's path inside the image.
	BinaryPath = "/usr/local/bin/helm-controller"
	// User is nobody:nogroup, numeric so runAsNonRoot can verify it.
	User = "65534:65534"
)

// Platforms the image is built for, in index order.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
	// 32-bit ARM as upstream ships it (GOARM=7).
	{OS: "linux", Architecture: "arm", Variant: "v7"},
}

// PlatformKey names a platform as registries and `docker --platform` do:
// os/arch, or os/arch/variant.
func PlatformKey(p v1.Platform) string {
	key := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		key += "/" + p.Variant
	}
	return key
}

// goEnv is what selects a platform for the go command.
func goEnv(p v1.Platform) []string {
	env := []string{"GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	if p.Architecture == "arm" && p.Variant != "" {
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	return env
}

// Build says what to build and how to stamp it.
type Build struct {
	// Root is the module root holding main.go.
	Root string
	// Version is stamped into the binary and used as the image tag.
	Version string
	// Revision is the full commit the image is built from.
	Revision string
	// Created is the commit time; every timestamp in the image is this one,
	// so one commit always gives one digest.
	Created time.Time
	// WorkDir receives the compiled binaries.
	WorkDir string
	// Log receives one line per step; nil discards them.
	Log io.Writer
}

// GitBuild fills Revision and Created from the repository at root, and
// Version from hack/version.sh unless version is set. SOURCE_DATE_EPOCH, when
// set, replaces the commit time, as reproducible-builds tools expect.
// Outside a git checkout (a source archive) the revision is "unknown" and
// the time SOURCE_DATE_EPOCH or else the Unix epoch, so the build still
// works and stays reproducible.
func GitBuild(root, version string) (Build, error) {
	b := Build{Root: root, Version: version, Revision: UnknownRevision}
	inGit := isCheckoutRoot(root)
	if inGit {
		rev, err := gitOutput(root, "rev-parse", "HEAD")
		if err != nil {
			return b, err
		}
		b.Revision = rev
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	switch {
	case epoch != "":
	case inGit:
		var err error
		if epoch, err = gitOutput(root, "log", "-1", "--format=%ct"); err != nil {
			return b, err
		}
	default:
		epoch = "0"
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return b, fmt.Errorf("parsing the build time %q: %w", epoch, err)
	}
	b.Created = time.Unix(secs, 0).UTC()
	if b.Version == "" {
		out, err := exec.Command(filepath.Join(root, "hack", "version.sh")).Output()
		if err != nil {
			return b, fmt.Errorf("running hack/version.sh: %w", err)
		}
		b.Version = strings.TrimSpace(string(out))
	}
	return b, nil
}

// UnknownRevision is the revision of a build outside a git checkout.
const UnknownRevision = "unknown"

// isCheckoutRoot tells whether root is the top of a git checkout of its
// own (a copy placed inside another checkout is not).
func isCheckoutRoot(root string) bool {
	top, err := gitOutput(root, "rev-parse", "--show-toplevel")
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return false
	}
	return filepath.Clean(top) == real
}

func gitOutput(root string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Labels are the OCI labels of every platform's image config.
func (b Build) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "helm-controller (waitStrategy: afterHooks)",
		"org.opencontainers.image.description": "Flux helm-controller, drop-in, with waitStrategy: afterHooks",
		"org.opencontainers.image.source":      SourceURL,
		"org.opencontainers.image.version":     b.Version,
		"org.opencontainers.image.revision":    b.Revision,
		"org.opencontainers.image.created":     b.Created.Format(time.RFC3339),
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// Image compiles the controller for every platform and assembles the image
// index.
func (b Build) Image(ctx context.Context) (v1.ImageIndex, error) {
	if err := b.validate(); err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range Platforms {
		start := time.Now()
		bin, err := b.compile(ctx, p)
		if err != nil {
			return nil, err
		}
		img, err := b.platformImage(p, bin)
		if err != nil {
			return nil, fmt.Errorf("assembling the %s image: %w", PlatformKey(p), err)
		}
		b.logf("built %s in %s", PlatformKey(p), time.Since(start).Round(time.Millisecond))
		platform := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, b.Labels()).(v1.ImageIndex), nil
}

func (b Build) validate() error {
	switch {
	case b.Root == "", b.WorkDir == "":
		return fmt.Errorf("build needs a module root and a work directory")
	case b.Version == "" || strings.Contains(b.Version, "latest"):
		return fmt.Errorf("build needs a version other than %q", b.Version)
	case b.Revision == "" || b.Created.IsZero():
		return fmt.Errorf("build needs a revision and a creation time")
	}
	if _, err := Tag(b.Version); err != nil {
		return fmt.Errorf("version %q is not a valid image tag: %w", b.Version, err)
	}
	return nil
}

func (b Build) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, format+"\n", args...)
	}
}

// compile builds a static binary: no cgo, no paths or VCS data that differ
// between checkouts, the version stamped in.
func (b Build) compile(ctx context.Context, p v1.Platform) ([]byte, error) {
	out := filepath.Join(b.WorkDir, strings.ReplaceAll(PlatformKey(p), "/", "-"), "helm-controller")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -X main.version="+b.Version, "-o", out, ".")
	cmd.Dir = b.Root
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly"), goEnv(p)...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compiling for %s: %w\n%s", PlatformKey(p), err, msg)
	}
	return os.ReadFile(out)
}

func (b Build) platformImage(p v1.Platform, binary []byte) (v1.Image, error) {
	layerTar, err := b.rootFS(binary)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS:           p.OS,
		Architecture: p.Architecture,
		Variant:      p.Variant,
		Created:      v1.Time{Time: b.Created},
		RootFS:       v1.RootFS{Type: "layers"},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{BinaryPath},
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
			WorkingDir: "/",
			Labels:     b.Labels(),
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: b.Created},
			CreatedBy: "hack/release: helm-controller " + b.Version,
			Comment:   "static binary, CA roots compiled in",
		},
	})
}

// rootFS is the image's single layer: the binary, a writable /tmp for the
// emptyDir to cover, and passwd/group entries so user 65534 has a name.
func (b Build) rootFS(binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		data []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{"tmp/", 0o1777, nil},
		{"usr/", 0o755, nil},
		{"usr/local/", 0o755, nil},
		{"usr/local/bin/", 0o755, nil},
		{strings.TrimPrefix(BinaryPath, "/"), 0o755, binary},
	}
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Mode: e.mode, ModTime: b.Created, Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(e.data)),
		}
		if strings.HasSuffix(e.name, "/") {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Tag is the image reference of a version.
func Tag(version string) (name.Tag, error) {
	return name.NewTag(Repository + ":" + version)
}

// Written lists what WriteImage put on disk.
type Written struct {
	Layout   string
	Tarballs map[string]string // PlatformKey ("linux/arm/v7") → path
	Digest   v1.Hash
}

// WriteImage writes the index as an OCI layout under dir/image and one
// docker-save tarball per platform (what `docker load` and `podman load`
// read), all tagged with the version.
func WriteImage(idx v1.ImageIndex, dir, version string) (Written, error) {
	w := Written{Layout: filepath.Join(dir, "image"), Tarballs: map[string]string{}}
	tag, err := Tag(version)
	if err != nil {
		return w, err
	}
	if w.Digest, err = idx.Digest(); err != nil {
		return w, err
	}
	if err := os.RemoveAll(w.Layout); err != nil {
		return w, err
	}
	p, err := layout.Write(w.Layout, empty.Index)
	if err != nil {
		return w, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	})); err != nil {
		return w, fmt.Errorf("writing the OCI layout: %w", err)
	}
	for _, pl := range Platforms {
		img, err := PlatformImage(idx, pl)
		if err != nil {
			return w, err
		}
		key := PlatformKey(pl)
		path := filepath.Join(dir, fmt.Sprintf("helm-controller-%s-%s.tar", version, strings.ReplaceAll(key, "/", "-")))
		if err := tarball.WriteToFile(path, tag, img); err != nil {
			return w, fmt.Errorf("writing the %s tarball: %w", key, err)
		}
		w.Tarballs[key] = path
	}
	return w, nil
}

// PlatformImage picks one platform's image out of the index.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && PlatformKey(*d.Platform) == PlatformKey(p) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the image has no %s manifest", PlatformKey(p))
}

// Push uploads the index and both images to ref with the credentials of the
// local Docker/Podman configuration.
func Push(ctx context.Context, idx v1.ImageIndex, ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("parsing %q: %w", ref, err)
	}
	if t, ok := r.(name.Tag); ok && t.TagStr() == "latest" {
		return nil, fmt.Errorf("refusing to push %q: give a version tag, not latest", ref)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return nil, fmt.Errorf("pushing %s: %w", r, err)
	}
	return r, nil
}
