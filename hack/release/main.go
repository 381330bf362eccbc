// Command release builds what a release ships (see package dist):
//
//	go run ./hack/release image     [-out dist] [-version v]
//	go run ./hack/release manifests [-out dist] [-version v]
//	go run ./hack/release assets    [-out dist] [-version v]
//	go run ./hack/release push      -image registry/name:tag [-version v]
//	go run ./hack/release sign      -image registry/name:tag -key cosign.key [-version v]
//	go run ./hack/release verify    -image registry/name:tag -key cosign.pub
//	go run ./hack/release keygen    [-out dir]
//	go run ./hack/release rehearse  [-version v]
//
// image writes the OCI layout, the docker-load tarballs, an SPDX SBOM per
// platform and the SLSA provenance (both also attached to the layout as
// referrers) and checksums.txt. assets does image and manifests together,
// with one checksums.txt over all of them: what a GitHub release holds.
// sign signs the digest this checkout builds, once it is in the registry;
// the key's password comes from COSIGN_PASSWORD, as with cosign.
// rehearse pushes (with the referrers), signs and verifies the build in a registry inside this
// process with a throwaway key: the release steps, without publishing.
//
// The version defaults to hack/version.sh. Every command but verify and
// keygen builds the image, since they need its digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/afterhooks/helm-controller/hack/release/dist"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	out, version, image, key string
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release image|manifests|assets|push|sign|verify|keygen [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var o options
	fs.StringVar(&o.out, "out", "dist", "output directory")
	fs.StringVar(&o.version, "version", "", "version to stamp (default: hack/version.sh)")
	fs.StringVar(&o.image, "image", "", "push, sign, verify: the image reference in the registry")
	fs.StringVar(&o.key, "key", "", "sign: cosign private key file; verify: cosign public key file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx := context.Background()
	switch args[0] {
	case "verify":
		return verify(ctx, o)
	case "keygen":
		return keygen(o)
	}
	idx, b, err := buildImage(ctx, o.out, o.version)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	switch args[0] {
	case "image":
		assets, err := writeImage(idx, b, o.out)
		if err != nil {
			return err
		}
		return writeChecksums(o.out, assets)
	case "manifests":
		_, err := writeManifests(b, digest, o.out)
		return err
	case "assets":
		assets, err := writeImage(idx, b, o.out)
		if err != nil {
			return err
		}
		manifests, err := writeManifests(b, digest, o.out)
		if err != nil {
			return err
		}
		return writeChecksums(o.out, append(assets, manifests...))
	case "push":
		if o.image == "" {
			return fmt.Errorf("push needs -image registry/name:tag")
		}
		ref, err := dist.Push(ctx, idx, o.image)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref, digest)
		return pushAttestations(ctx, idx, b, ref)
	case "sign":
		return sign(ctx, o, digest)
	case "rehearse":
		return rehearse(ctx, idx, b)
	default:
		return fmt.Errorf("unknown command %q: want image, manifests, assets, push, sign, verify, keygen or rehearse", args[0])
	}
}

func buildImage(ctx context.Context, out, version string) (v1.ImageIndex, dist.Build, error) {
	b, err := dist.GitBuild(".", version)
	if err != nil {
		return nil, b, err
	}
	b.WorkDir = filepath.Join(out, "bin")
	b.Log = os.Stderr
	idx, err := b.Image(ctx)
	return idx, b, err
}

// writeImage writes the layout, the tarballs and the attestations, and
// returns the release assets among them.
func writeImage(idx v1.ImageIndex, b dist.Build, out string) ([]string, error) {
	w, err := dist.WriteImage(idx, out, b.Version)
	if err != nil {
		return nil, err
	}
	fmt.Printf("image %s:%s@%s\n  layout  %s\n", dist.Repository, b.Version, w.Digest, w.Layout)
	var assets []string
	for _, p := range dist.Platforms {
		path := w.Tarballs[dist.PlatformKey(p)]
		fmt.Printf("  tarball %s\n", path)
		assets = append(assets, path)
	}
	arts, err := dist.Attestations(b, idx)
	if err != nil {
		return nil, err
	}
	if err := dist.AttachToLayout(w.Layout, b.Created, arts); err != nil {
		return nil, err
	}
	files, err := dist.WriteArtifacts(out, arts)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		fmt.Printf("  %-7s %s (attached to %s)\n", kind(arts[i]), f, arts[i].Subject.Digest)
	}
	return append(assets, files...), nil
}

func kind(a dist.Artifact) string {
	if a.ArtifactType == dist.SBOMMediaType {
		return "sbom"
	}
	return "slsa"
}

// pushAttestations pushes the SBOMs and the provenance as referrers of
// the image just pushed.
func pushAttestations(ctx context.Context, idx v1.ImageIndex, b dist.Build, ref name.Reference) error {
	arts, err := dist.Attestations(b, idx)
	if err != nil {
		return err
	}
	if err := dist.PushAttestations(ctx, ref.Context(), b.Created, arts); err != nil {
		return err
	}
	fmt.Printf("pushed %d referrers (SBOMs, provenance) to %s\n", len(arts), ref.Context())
	return nil
}

func writeManifests(b dist.Build, digest v1.Hash, out string) ([]string, error) {
	assets, err := dist.Manifests(".", b.Version, digest.String())
	if err != nil {
		return nil, err
	}
	if err := dist.WriteManifests(out, assets); err != nil {
		return nil, err
	}
	crds, deploy := filepath.Join(out, dist.CRDsAsset), filepath.Join(out, dist.DeploymentAsset)
	fmt.Printf("wrote %s and %s for %s:%s@%s\n", crds, deploy, dist.Repository, b.Version, digest)
	return []string{crds, deploy}, nil
}

func writeChecksums(out string, assets []string) error {
	path, err := dist.WriteChecksums(out, assets)
	if err != nil {
		return err
	}
	fmt.Printf("  sums    %s\n", path)
	return nil
}

func sign(ctx context.Context, o options, digest v1.Hash) error {
	if o.image == "" || o.key == "" {
		return fmt.Errorf("sign needs -image registry/name:tag and -key cosign.key")
	}
	key, err := os.ReadFile(o.key)
	if err != nil {
		return err
	}
	signed, err := dist.Sign(ctx, dist.SignOptions{
		Image: o.image, WantDigest: digest.String(), KeyPEM: key, Password: []byte(os.Getenv("COSIGN_PASSWORD")),
	})
	if err != nil {
		return err
	}
	fmt.Printf("signed %s\n", signed)
	return nil
}

func verify(ctx context.Context, o options) error {
	if o.image == "" || o.key == "" {
		return fmt.Errorf("verify needs -image registry/name:tag and -key cosign.pub")
	}
	key, err := os.ReadFile(o.key)
	if err != nil {
		return err
	}
	d, err := dist.Verify(ctx, o.image, key)
	if err != nil {
		return err
	}
	fmt.Printf("verified %s\n", d)
	return nil
}

// keygen writes cosign.key (encrypted with COSIGN_PASSWORD) and cosign.pub,
// as `cosign generate-key-pair` does, for those without the cosign CLI.
func keygen(o options) error {
	priv, pub, err := dist.GenerateSigningKey([]byte(os.Getenv("COSIGN_PASSWORD")))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"cosign.key": priv, "cosign.pub": pub} {
		path := filepath.Join(o.out, name)
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s exists; not overwriting a key", path)
		}
		mode := os.FileMode(0o644)
		if name == "cosign.key" {
			mode = 0o600
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			return err
		}
		fmt.Printf("wrote %s\n", path)
	}
	return nil
}

// rehearse runs push, sign and verify against an in-process registry with
// a throwaway key, and checks that another image under the tag fails.
func rehearse(ctx context.Context, idx v1.ImageIndex, b dist.Build) error {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	image := strings.TrimPrefix(srv.URL, "http://") + "/afterhooks/helm-controller:" + b.Version
	ref, err := dist.Push(ctx, idx, image)
	if err != nil {
		return err
	}
	if err := pushAttestations(ctx, idx, b, ref); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	password := []byte("rehearsal")
	priv, pub, err := dist.GenerateSigningKey(password)
	if err != nil {
		return err
	}
	if _, err := dist.Sign(ctx, dist.SignOptions{Image: ref.String(), WantDigest: digest.String(), KeyPEM: priv, Password: password}); err != nil {
		return err
	}
	if _, err := dist.Verify(ctx, ref.String(), pub); err != nil {
		return err
	}
	fmt.Printf("rehearsed: pushed, signed and verified %s@%s (in-process registry, throwaway key)\n", image, digest)
	other, err := random.Index(64, 1, 1)
	if err != nil {
		return err
	}
	if _, err := dist.Push(ctx, other, image); err != nil {
		return err
	}
	if _, err := dist.Verify(ctx, ref.String(), pub); err == nil {
		return fmt.Errorf("an unsigned image pushed under %s verified", image)
	}
	fmt.Println("rehearsed: an unsigned image under the same tag fails to verify")
	return nil
}
