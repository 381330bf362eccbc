// Command release builds what a release ships (see package dist):
//
//	go run ./hack/release image     [-out dist] [-version v]
//	go run ./hack/release push      -image registry/name:tag [-version v]
//	go run ./hack/release manifests [-out dist] [-version v]
//
// The version defaults to hack/version.sh. manifests builds the image too,
// since the Deployment pins its digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/afterhooks/helm-controller/hack/release/dist"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release image|push|manifests [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fs.String("out", "dist", "output directory")
	version := fs.String("version", "", "version to stamp (default: hack/version.sh)")
	image := fs.String("image", "", "push: the reference to push to")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx := context.Background()
	idx, b, err := buildImage(ctx, *out, *version)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	switch args[0] {
	case "image":
		w, err := dist.WriteImage(idx, *out, b.Version)
		if err != nil {
			return err
		}
		fmt.Printf("image %s:%s@%s\n  layout  %s\n", dist.Repository, b.Version, w.Digest, w.Layout)
		for _, p := range dist.Platforms {
			fmt.Printf("  tarball %s\n", w.Tarballs[p.OS+"/"+p.Architecture])
		}
	case "push":
		if *image == "" {
			return fmt.Errorf("push needs -image registry/name:tag")
		}
		ref, err := dist.Push(ctx, idx, *image)
		if err != nil {
			return err
		}
		fmt.Printf("pushed %s@%s\n", ref, digest)
	case "manifests":
		assets, err := dist.Manifests(".", b.Version, digest.String())
		if err != nil {
			return err
		}
		if err := dist.WriteManifests(*out, assets); err != nil {
			return err
		}
		fmt.Printf("wrote %s and %s for %s:%s@%s\n", filepath.Join(*out, dist.CRDsAsset),
			filepath.Join(*out, dist.DeploymentAsset), dist.Repository, b.Version, digest)
	default:
		return fmt.Errorf("unknown command %q: want image, push or manifests", args[0])
	}
	return nil
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
