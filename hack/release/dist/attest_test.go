package dist

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// goVersionModules runs `go version -m` on a binary and returns the
// modules it lists as compiled in: each dep line, or the replacement on
// the `=>` line that follows it.
func goVersionModules(t *testing.T, path string) []Module {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", path).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", path, err)
	}
	var mods []Module
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(strings.TrimPrefix(sc.Text(), "\t"), "\t")
		switch {
		case len(f) >= 3 && f[0] == "dep":
			mods = append(mods, Module{Path: f[1], Version: f[2]})
		case len(f) >= 3 && f[0] == "=>":
			mods[len(mods)-1] = Module{Path: f[1], Version: f[2]}
		}
	}
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	return mods
}

// testBinary is a real Go binary with many modules compiled in: the test
// binary running now. Building the controller for three platforms is
// TestImage's job in test/e2e; this package's tests stay fast.
func testBinary(t *testing.T) (string, []byte) {
	t.Helper()
	path, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

// indexOf wraps binary as the controller of every platform, as Image does.
func indexOf(t *testing.T, b Build, binary []byte) v1.ImageIndex {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range Platforms {
		img, err := b.platformImage(p, binary)
		if err != nil {
			t.Fatal(err)
		}
		platform := p
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return mutate.AppendManifests(idx, adds...)
}

func testBuild() Build {
	return Build{Version: "v0.1.0-dev.0123456789ab", Revision: "0123456789abcdef0123456789abcdef01234567",
		Created: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
}

func modulesOnly(mods []Module) []Module {
	out := make([]Module, len(mods))
	for i, m := range mods {
		out[i] = Module{Path: m.Path, Version: m.Version}
	}
	return out
}

func TestSBOMListsWhatGoVersionMLists(t *testing.T) {
	path, binary := testBinary(t)
	want := goVersionModules(t, path)
	if len(want) < 20 {
		t.Fatalf("go version -m lists only %d modules; the test proves little", len(want))
	}
	b := testBuild()
	sbom, err := SBOM(b, Platforms[0], binary)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SBOMModules(sbom)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("SBOM modules differ from go version -m:\n got %v\nwant %v", got, want)
	}

	var doc map[string]any
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["spdxVersion"] != "SPDX-2.3" || doc["dataLicense"] != "CC0-1.0" || doc["SPDXID"] != "SPDXRef-DOCUMENT" {
		t.Errorf("not an SPDX 2.3 document: %v %v %v", doc["spdxVersion"], doc["dataLicense"], doc["SPDXID"])
	}
	info, err := ReadBinaryInfo(binary)
	if err != nil {
		t.Fatal(err)
	}
	main := doc["packages"].([]any)[0].(map[string]any)
	sum := main["checksums"].([]any)[0].(map[string]any)
	if sum["algorithm"] != "SHA256" || sum["checksumValue"] != info.SHA256 {
		t.Errorf("the binary's package has checksum %v, want SHA256 %s", sum, info.SHA256)
	}
	again, err := SBOM(b, Platforms[0], binary)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sbom, again) {
		t.Error("two SBOMs of one binary differ")
	}
}

func TestProvenanceStatement(t *testing.T) {
	path, binary := testBinary(t)
	b := testBuild()
	idx := indexOf(t, b, binary)
	arts, err := Attestations(b, idx)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != len(Platforms)+1 {
		t.Fatalf("%d attestations, want an SBOM per platform and one provenance", len(arts))
	}
	prov := arts[len(arts)-1]
	var st Statement
	if err := json.Unmarshal(prov.Data, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != InTotoStatementType || st.PredicateType != SLSAProvenanceType {
		t.Errorf("statement %q with predicate %q", st.Type, st.PredicateType)
	}

	// Subjects: the index, every platform manifest, every binary.
	digest, _ := idx.Digest()
	m, _ := idx.IndexManifest()
	want := map[string]bool{digest.Hex: true, mustBinaryInfo(t, binary).SHA256: true}
	for _, d := range m.Manifests {
		want[d.Digest.Hex] = true
	}
	got := map[string]bool{}
	for _, s := range st.Subject {
		got[s.Digest["sha256"]] = true
	}
	for h := range want {
		if !got[h] {
			t.Errorf("no subject with sha256 %s; subjects %+v", h, st.Subject)
		}
	}
	if prov.Subject.Digest != digest {
		t.Errorf("the provenance is attached to %s, want the index %s", prov.Subject.Digest, digest)
	}

	// Inputs: the commit, and the modules go version -m lists.
	var mods []Module
	var commit string
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		if c := d.Digest["gitCommit"]; c != "" {
			commit = c
		}
		if v, ok := strings.CutPrefix(d.URI, "pkg:golang/"); ok && d.Name != "go" {
			p, ver, _ := strings.Cut(v, "@")
			mods = append(mods, Module{Path: p, Version: ver})
		}
	}
	if commit != b.Revision {
		t.Errorf("resolved git commit %q, want %q", commit, b.Revision)
	}
	if wantMods := goVersionModules(t, path); !slices.Equal(mods, wantMods) {
		t.Errorf("provenance modules differ from go version -m:\n got %v\nwant %v", mods, wantMods)
	}
	if got := st.Predicate.BuildDefinition.ExternalParameters["version"]; got != b.Version {
		t.Errorf("externalParameters.version = %v", got)
	}
}

func mustBinaryInfo(t *testing.T, binary []byte) BinaryInfo {
	t.Helper()
	info, err := ReadBinaryInfo(binary)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// The attestations go into the OCI layout as referrers: a reader finds
// each one from its subject's digest, byte for byte.
func TestAttachToLayout(t *testing.T) {
	_, binary := testBinary(t)
	b := testBuild()
	idx := indexOf(t, b, binary)
	arts, err := Attestations(b, idx)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx); err != nil {
		t.Fatal(err)
	}
	if err := AttachToLayout(dir, b.Created, arts); err != nil {
		t.Fatal(err)
	}
	for _, a := range arts {
		found, err := LayoutReferrers(dir, a.Subject.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].ArtifactType != a.ArtifactType || !bytes.Equal(found[0].Data, a.Data) || found[0].FileName != a.FileName {
			t.Errorf("referrers of %s: %d found, want %s (%s)", a.Subject.Digest, len(found), a.FileName, a.ArtifactType)
		}
	}
	// The image itself is unchanged: the index is still the first entry.
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := top.IndexManifest()
	digest, _ := idx.Digest()
	if m.Manifests[0].Digest != digest || len(m.Manifests) != 1+len(arts) {
		t.Errorf("layout index lists %d manifests, first %s; want the image %s and %d artifacts", len(m.Manifests), m.Manifests[0].Digest, digest, len(arts))
	}
}

func TestWriteChecksums(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for name, data := range map[string]string{"a.yaml": "a\n", "b.tar": "bb"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	sums, err := WriteChecksums(dir, files)
	if err != nil {
		t.Fatal(err)
	}
	check := func() error {
		cmd := exec.Command("sha256sum", "-c", filepath.Base(sums))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s", out)
		}
		return err
	}
	if err := check(); err != nil {
		t.Fatalf("sha256sum -c rejects %s: %v", sums, err)
	}
	if err := os.WriteFile(files[0], []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := check(); err == nil {
		t.Error("sha256sum -c accepts a changed file")
	}
	if _, err := WriteChecksums(dir, []string{"/etc/passwd"}); err == nil {
		t.Error("a file outside the directory was accepted")
	}
}

// PushAttestations puts the SBOMs and the provenance into a registry as
// referrers: with the referrers API, and through the fallback tag
// without it.
func TestPushAttestations(t *testing.T) {
	_, binary := testBinary(t)
	b := testBuild()
	idx := indexOf(t, b, binary)
	arts, err := Attestations(b, idx)
	if err != nil {
		t.Fatal(err)
	}
	for _, referrersAPI := range []bool{true, false} {
		t.Run(fmt.Sprintf("referrers API %v", referrersAPI), func(t *testing.T) {
			opts := []registry.Option{registry.Logger(log.New(io.Discard, "", 0))}
			if referrersAPI {
				opts = append(opts, registry.WithReferrersSupport(true))
			}
			srv := httptest.NewServer(registry.New(opts...))
			defer srv.Close()
			ref, err := Push(context.Background(), idx, strings.TrimPrefix(srv.URL, "http://")+"/afterhooks/helm-controller:"+b.Version)
			if err != nil {
				t.Fatal(err)
			}
			if err := PushAttestations(context.Background(), ref.Context(), b.Created, arts); err != nil {
				t.Fatal(err)
			}
			for _, a := range arts {
				refs, err := remote.Referrers(ref.Context().Digest(a.Subject.Digest.String()))
				if err != nil {
					t.Fatal(err)
				}
				m, err := refs.IndexManifest()
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Manifests) != 1 {
					t.Fatalf("referrers of %s: %+v, want one %s", a.Subject.Digest, m.Manifests, a.FileName)
				}
				// The descriptor's artifactType is the registry's reading
				// (go-containerregistry's test registry reports the config
				// media type); the manifest itself must carry ours.
				img, err := remote.Image(ref.Context().Digest(m.Manifests[0].Digest.String()))
				if err != nil {
					t.Fatal(err)
				}
				am, err := img.Manifest()
				if err != nil {
					t.Fatal(err)
				}
				if am.ArtifactType != a.ArtifactType || am.Subject == nil || am.Subject.Digest != a.Subject.Digest {
					t.Errorf("artifact manifest has artifactType %q and subject %v, want %q about %s", am.ArtifactType, am.Subject, a.ArtifactType, a.Subject.Digest)
				}
				layers, err := img.Layers()
				if err != nil || len(layers) != 1 {
					t.Fatalf("artifact layers %d: %v", len(layers), err)
				}
				rc, err := layers[0].Compressed()
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, a.Data) {
					t.Errorf("the registry holds another %s", a.FileName)
				}
			}
		})
	}
}
