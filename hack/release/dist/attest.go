package dist

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// emptyConfigMediaType and emptyConfig are the OCI 1.1 empty descriptor an
// artifact manifest uses as its config.
const (
	emptyConfigMediaType types.MediaType = "application/vnd.oci.empty.v1+json"
	emptyConfig                          = "{}"
)

// Artifact is a document about the image (an SBOM or a provenance
// statement), attached to it as an OCI 1.1 referrer: an artifact manifest
// whose subject is the manifest it describes.
type Artifact struct {
	// FileName is the release asset's name, and the layer's title.
	FileName string
	// ArtifactType is the artifact manifest's artifactType and its
	// layer's media type.
	ArtifactType string
	Data         []byte
	// Subject is the manifest (an image index or a platform image) the
	// artifact describes.
	Subject v1.Descriptor
}

// Attestations builds, from the image alone, one SPDX SBOM per platform
// (subject: that platform's image) and one SLSA provenance statement
// (subject: the index). The binaries are read back out of the image's
// layers, so the documents describe exactly what a kubelet would run.
func Attestations(b Build, idx v1.ImageIndex) ([]Artifact, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	binaries := map[string][]byte{}
	var out []Artifact
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		key := PlatformKey(*d.Platform)
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		bin, err := ImageFile(img, BinaryPath)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		binaries[key] = bin
		sbom, err := SBOM(b, *d.Platform, bin)
		if err != nil {
			return nil, fmt.Errorf("SBOM of %s: %w", key, err)
		}
		out = append(out, Artifact{
			FileName:     fmt.Sprintf("helm-controller-%s-%s.spdx.json", b.Version, flatKey(key)),
			ArtifactType: SBOMMediaType,
			Data:         sbom,
			Subject:      v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest},
		})
	}
	prov, err := ProvenanceStatement(b, idx, binaries)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	subject, err := indexDescriptor(idx)
	if err != nil {
		return nil, err
	}
	return append(out, Artifact{
		FileName:     fmt.Sprintf("helm-controller-%s.provenance.intoto.json", b.Version),
		ArtifactType: ProvenanceMediaType,
		Data:         prov,
		Subject:      subject,
	}), nil
}

func indexDescriptor(idx v1.ImageIndex) (v1.Descriptor, error) {
	digest, err := idx.Digest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	size, err := idx.Size()
	if err != nil {
		return v1.Descriptor{}, err
	}
	mt, err := idx.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{MediaType: mt, Size: size, Digest: digest}, nil
}

func flatKey(platformKey string) string { return strings.ReplaceAll(platformKey, "/", "-") }

// ImageFile returns one regular file of the image's flattened filesystem.
func ImageFile(img v1.Image, path string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	name := strings.TrimPrefix(path, "/")
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s is not in the image", path)
		}
		if err != nil {
			return nil, fmt.Errorf("reading the image's layers: %w", err)
		}
		if hdr.Name == name && hdr.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

// manifest is the artifact manifest of a, with its blobs.
func (a Artifact) manifest(created time.Time) (raw []byte, blob v1.Descriptor, config v1.Descriptor, err error) {
	blob = v1.Descriptor{
		MediaType:   types.MediaType(a.ArtifactType),
		Size:        int64(len(a.Data)),
		Annotations: map[string]string{"org.opencontainers.image.title": a.FileName},
	}
	if blob.Digest, _, err = v1.SHA256(bytes.NewReader(a.Data)); err != nil {
		return nil, blob, config, err
	}
	config = v1.Descriptor{MediaType: emptyConfigMediaType, Size: int64(len(emptyConfig))}
	if config.Digest, _, err = v1.SHA256(strings.NewReader(emptyConfig)); err != nil {
		return nil, blob, config, err
	}
	subject := a.Subject
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  a.ArtifactType,
		Config:        config,
		Layers:        []v1.Descriptor{blob},
		Subject:       &subject,
		Annotations:   map[string]string{"org.opencontainers.image.created": created.UTC().Format(time.RFC3339)},
	}
	raw, err = json.Marshal(m)
	return raw, blob, config, err
}

// AttachToLayout writes each artifact into the OCI layout as a referrer
// of its subject: the blobs, the artifact manifest, and a descriptor in
// the layout's index.json carrying the artifactType and the file name, so
// both referrers-aware tools and plain layout readers find it.
func AttachToLayout(layoutPath string, created time.Time, arts []Artifact) error {
	p, err := layout.FromPath(layoutPath)
	if err != nil {
		return fmt.Errorf("opening the OCI layout: %w", err)
	}
	for _, a := range arts {
		raw, blob, config, err := a.manifest(created)
		if err != nil {
			return err
		}
		digest, size, err := v1.SHA256(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		for _, w := range []struct {
			h    v1.Hash
			data []byte
		}{{blob.Digest, a.Data}, {config.Digest, []byte(emptyConfig)}, {digest, raw}} {
			if err := p.WriteBlob(w.h, io.NopCloser(bytes.NewReader(w.data))); err != nil {
				return fmt.Errorf("writing %s into the layout: %w", a.FileName, err)
			}
		}
		if err := p.AppendDescriptor(v1.Descriptor{
			MediaType:    types.OCIManifestSchema1,
			Size:         size,
			Digest:       digest,
			ArtifactType: a.ArtifactType,
			Annotations: map[string]string{
				"org.opencontainers.image.title": a.FileName,
				// Which manifest it describes, for readers that do not
				// open the artifact manifest's subject.
				AnnotationSubject: a.Subject.Digest.String(),
			},
		}); err != nil {
			return fmt.Errorf("listing %s in the layout: %w", a.FileName, err)
		}
	}
	return nil
}

// AnnotationSubject, on an artifact's descriptor in the layout's
// index.json, is the digest of the manifest the artifact describes.
const AnnotationSubject = "dev.afterhooks.helm-controller.subject"

// WriteArtifacts writes each artifact as a release asset into dir and
// returns their paths.
func WriteArtifacts(dir string, arts []Artifact) ([]string, error) {
	var paths []string
	for _, a := range arts {
		path := filepath.Join(dir, a.FileName)
		if err := os.WriteFile(path, a.Data, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// LayoutReferrers lists the artifacts the layout holds about the manifest
// with digest subject, by reading each artifact manifest's subject field.
func LayoutReferrers(layoutPath string, subject v1.Hash) ([]Artifact, error) {
	p, err := layout.FromPath(layoutPath)
	if err != nil {
		return nil, err
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []Artifact
	for _, d := range m.Manifests {
		if d.ArtifactType == "" {
			continue
		}
		raw, err := p.Bytes(d.Digest)
		if err != nil {
			return nil, err
		}
		var am v1.Manifest
		if err := json.Unmarshal(raw, &am); err != nil {
			return nil, fmt.Errorf("artifact manifest %s: %w", d.Digest, err)
		}
		if am.Subject == nil || am.Subject.Digest != subject || len(am.Layers) != 1 {
			continue
		}
		data, err := p.Bytes(am.Layers[0].Digest)
		if err != nil {
			return nil, err
		}
		out = append(out, Artifact{
			FileName: am.Layers[0].Annotations["org.opencontainers.image.title"], ArtifactType: am.ArtifactType,
			Data: data, Subject: *am.Subject,
		})
	}
	return out, nil
}

// rawManifest is an artifact manifest ready to put into a registry.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }

// PushAttestations uploads each artifact into repo as an OCI 1.1 referrer
// of its subject, which must already be there (Push first). Registries
// without the referrers API get the fallback tag sha256-<subject digest>,
// as the OCI distribution spec describes, so `oras discover` and
// `cosign tree` find them either way.
func PushAttestations(ctx context.Context, repo name.Repository, created time.Time, arts []Artifact, extra ...remote.Option) error {
	opts := remoteOptions(ctx, extra)
	for _, a := range arts {
		raw, blob, config, err := a.manifest(created)
		if err != nil {
			return err
		}
		for _, l := range []v1.Layer{
			static.NewLayer(a.Data, blob.MediaType),
			static.NewLayer([]byte(emptyConfig), config.MediaType),
		} {
			if err := remote.WriteLayer(repo, l, opts...); err != nil {
				return fmt.Errorf("uploading %s: %w", a.FileName, err)
			}
		}
		digest, _, err := v1.SHA256(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		if err := remote.Put(repo.Digest(digest.String()), rawManifest(raw), opts...); err != nil {
			return fmt.Errorf("pushing %s as a referrer of %s: %w", a.FileName, a.Subject.Digest, err)
		}
	}
	return nil
}
