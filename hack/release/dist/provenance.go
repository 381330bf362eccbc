package dist

import (
	"encoding/json"
	"fmt"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const (
	// ProvenanceMediaType is the media type of an in-toto statement; it is
	// also the artifactType of the provenance attached to the image.
	ProvenanceMediaType = "application/vnd.in-toto+json"
	// InTotoStatementType and SLSAProvenanceType identify the statement
	// and its predicate, as in-toto and SLSA define them.
	InTotoStatementType = "https://in-toto.io/Statement/v1"
	SLSAProvenanceType  = "https://slsa.dev/provenance/v1"
	// BuildType says how to read externalParameters: the build `make image`
	// runs through hack/release.
	BuildType = SourceURL + "/hack/release/image@v1"
	// BuilderID names what ran the build. The build runs wherever `make
	// image` is run; nothing here attests to a hosted builder.
	BuilderID = SourceURL + "/hack/release"
)

// Statement is an in-toto v1 statement with an SLSA v1 provenance
// predicate. Field names are in-toto's and SLSA's.
type Statement struct {
	Type          string               `json:"_type"`
	Subject       []ResourceDescriptor `json:"subject"`
	PredicateType string               `json:"predicateType"`
	Predicate     Provenance           `json:"predicate"`
}

// ResourceDescriptor names an artifact by name, URI and digests.
type ResourceDescriptor struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Provenance is SLSA v1's predicate: what was built from what, by whom.
type Provenance struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition holds the inputs of the build.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   map[string]any       `json:"externalParameters"`
	InternalParameters   map[string]any       `json:"internalParameters,omitempty"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// RunDetails says who ran the build.
type RunDetails struct {
	Builder struct {
		ID string `json:"id"`
	} `json:"builder"`
}

// ProvenanceStatement writes the SLSA provenance of an image index: its
// subjects are the index, every platform's manifest and every platform's
// binary; its inputs are the git revision, the Go toolchain and every Go
// module compiled into any of the binaries. binaries maps PlatformKey to
// the binary taken from that platform's image. It reads nothing from the
// network and holds no timestamps of the run, so one commit gives one
// statement.
func ProvenanceStatement(b Build, idx v1.ImageIndex, binaries map[string][]byte) ([]byte, error) {
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	st := Statement{
		Type:          InTotoStatementType,
		PredicateType: SLSAProvenanceType,
		Subject:       []ResourceDescriptor{{Name: Repository + ":" + b.Version, Digest: hexDigest(digest)}},
	}
	subjects, infos, err := platformSubjects(b, m, binaries)
	if err != nil {
		return nil, err
	}
	st.Subject = append(st.Subject, subjects...)
	st.Predicate.BuildDefinition = buildDefinition(b, resolvedDependencies(b, infos))
	st.Predicate.RunDetails.Builder.ID = BuilderID
	return json.MarshalIndent(st, "", "  ")
}

// platformSubjects returns, for every platform of the index manifest m,
// its manifest and its binary as subjects, and the build information of
// each binary, in the order of m.
func platformSubjects(b Build, m *v1.IndexManifest, binaries map[string][]byte) ([]ResourceDescriptor, []BinaryInfo, error) {
	var subjects []ResourceDescriptor
	var infos []BinaryInfo
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		key := PlatformKey(*d.Platform)
		subjects = append(subjects, ResourceDescriptor{
			Name:        Repository + "@" + d.Digest.String(),
			Digest:      hexDigest(d.Digest),
			Annotations: map[string]string{"platform": key},
		})
		binary, ok := binaries[key]
		if !ok {
			return nil, nil, fmt.Errorf("no binary given for %s", key)
		}
		info, err := ReadBinaryInfo(binary)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", key, err)
		}
		subjects = append(subjects, ResourceDescriptor{
			Name:        "helm-controller-" + b.Version + "-" + flatKey(key),
			Digest:      map[string]string{"sha256": info.SHA256},
			Annotations: map[string]string{"platform": key, "path": BinaryPath},
		})
		infos = append(infos, info)
	}
	return subjects, infos, nil
}

// resolvedDependencies lists the inputs of the build: the git revision,
// every Go toolchain that compiled a binary, and every Go module compiled
// into any of them, sorted by path and version.
func resolvedDependencies(b Build, infos []BinaryInfo) []ResourceDescriptor {
	goVersions := map[string]bool{}
	modules := map[string]Module{}
	for _, info := range infos {
		goVersions[info.GoVersion] = true
		for _, mod := range info.Modules {
			modules[mod.Path+"@"+mod.Version] = mod
		}
	}

	deps := []ResourceDescriptor{{
		URI:    "git+" + SourceURL + "@" + b.Revision,
		Digest: map[string]string{"gitCommit": b.Revision},
	}}
	for _, v := range sortedKeys(goVersions) {
		deps = append(deps, ResourceDescriptor{Name: "go", URI: "pkg:golang/stdlib@" + v})
	}
	mods := make([]Module, 0, len(modules))
	for _, mod := range modules {
		mods = append(mods, mod)
	}
	sort.Slice(mods, func(i, j int) bool {
		if mods[i].Path != mods[j].Path {
			return mods[i].Path < mods[j].Path
		}
		return mods[i].Version < mods[j].Version
	})
	for _, mod := range mods {
		deps = append(deps, moduleDependency(mod))
	}
	return deps
}

// moduleDependency describes a Go module compiled into a binary, with its
// go.sum hash and the path it replaces when it has them.
func moduleDependency(mod Module) ResourceDescriptor {
	d := ResourceDescriptor{Name: mod.Path, URI: "pkg:golang/" + mod.Path + "@" + mod.Version}
	if mod.Sum != "" {
		d.Annotations = map[string]string{"go.sum": mod.Sum}
	}
	if mod.ReplacedPath != "" {
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["replaces"] = mod.ReplacedPath
	}
	return d
}

// buildDefinition says how the image was built: the parameters `make
// image` takes, the build settings it fixes, and the resolved inputs deps.
func buildDefinition(b Build, deps []ResourceDescriptor) BuildDefinition {
	platforms := make([]string, 0, len(Platforms))
	for _, p := range Platforms {
		platforms = append(platforms, PlatformKey(p))
	}
	return BuildDefinition{
		BuildType: BuildType,
		ExternalParameters: map[string]any{
			"version":    b.Version,
			"repository": Repository,
			"platforms":  platforms,
		},
		InternalParameters: map[string]any{
			"env":     []string{"CGO_ENABLED=0", "GOFLAGS=-mod=readonly"},
			"flags":   []string{"-trimpath", "-buildvcs=false"},
			"ldflags": "-s -w -X main.version=" + b.Version,
			"created": b.Created.UTC().Format("2006-01-02T15:04:05Z"),
		},
		ResolvedDependencies: deps,
	}
}

func hexDigest(h v1.Hash) map[string]string {
	return map[string]string{h.Algorithm: h.Hex}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
