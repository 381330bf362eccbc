package dist

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// SBOMMediaType is the media type of an SPDX JSON document; it is also the
// artifactType of the SBOM attached to the image.
const SBOMMediaType = "application/spdx+json"

// The subset of SPDX 2.3 (JSON) the SBOM uses. Field names are SPDX's.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []SPDXPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

// SPDXPackage is one package of the SBOM: the binary, the Go toolchain or
// one Go module.
type SPDXPackage struct {
	SPDXID           string            `json:"SPDXID"`
	Name             string            `json:"name"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	SourceInfo       string            `json:"sourceInfo,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

// Module is one Go module compiled into a binary, as its build information
// records it (what `go version -m` prints as a dep line, with the
// replacement that was actually compiled when there is one).
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	// Sum is go.sum's h1: hash of the module that was compiled.
	Sum string `json:"sum,omitempty"`
	// ReplacedPath is the module path go.mod named before a replace
	// directive; empty when the module was not replaced.
	ReplacedPath string `json:"replacedPath,omitempty"`
}

// BinaryInfo is what a Go binary says about how it was built.
type BinaryInfo struct {
	SHA256    string
	GoVersion string
	Main      string
	Modules   []Module
	Settings  map[string]string
}

// ReadBinaryInfo reads the build information the Go linker embeds in every
// binary: the same data `go version -m` prints.
func ReadBinaryInfo(binary []byte) (BinaryInfo, error) {
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return BinaryInfo{}, fmt.Errorf("reading the binary's build information: %w", err)
	}
	sum := sha256.Sum256(binary)
	out := BinaryInfo{
		SHA256:    hex.EncodeToString(sum[:]),
		GoVersion: info.GoVersion,
		Main:      info.Main.Path,
		Modules:   compiledModules(info.Deps),
		Settings:  map[string]string{},
	}
	for _, s := range info.Settings {
		out.Settings[s.Key] = s.Value
	}
	return out, nil
}

// compiledModules lists what was compiled: a replaced module is listed
// under its replacement's path and version, with the original path kept.
func compiledModules(deps []*debug.Module) []Module {
	out := make([]Module, 0, len(deps))
	for _, d := range deps {
		m := Module{Path: d.Path, Version: d.Version, Sum: d.Sum}
		if r := d.Replace; r != nil {
			m = Module{Path: r.Path, Version: r.Version, Sum: r.Sum, ReplacedPath: d.Path}
		}
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// SBOM writes an SPDX 2.3 JSON document for the binary of one platform's
// image: the binary itself (with its SHA-256), the Go toolchain, and every
// module the build information lists. It reads the binary only, so it needs
// no network, and it is deterministic for one build.
func SBOM(b Build, p v1.Platform, binary []byte) ([]byte, error) {
	bin, err := ReadBinaryInfo(binary)
	if err != nil {
		return nil, err
	}
	const binaryID = "SPDXRef-Package-helm-controller"
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("helm-controller %s %s", b.Version, PlatformKey(p)),
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s/%s/%s", SourceURL, b.Version, strings.ReplaceAll(PlatformKey(p), "/", "-"), bin.SHA256),
		CreationInfo: spdxCreationInfo{
			Created:  b.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: afterhooks-helm-controller-hack-release", "Organization: afterhooks"},
		},
		Packages: []SPDXPackage{{
			SPDXID:           binaryID,
			Name:             bin.Main,
			VersionInfo:      b.Version,
			DownloadLocation: "git+" + SourceURL + "@" + b.Revision,
			PrimaryPurpose:   "APPLICATION",
			Checksums:        []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: bin.SHA256}},
			SourceInfo:       "built from revision " + b.Revision + " for " + PlatformKey(p),
			ExternalRefs:     []spdxExternalRef{purl(bin.Main, b.Version)},
		}, {
			SPDXID:           "SPDXRef-Package-go-toolchain",
			Name:             "go",
			VersionInfo:      bin.GoVersion,
			DownloadLocation: "https://go.dev/dl/",
			PrimaryPurpose:   "LIBRARY",
			SourceInfo:       "the Go standard library and runtime compiled into the binary",
			ExternalRefs:     []spdxExternalRef{purl("stdlib", bin.GoVersion)},
		}},
		Relationships: []spdxRelationship{
			{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: binaryID},
			{Element: binaryID, Type: "DEPENDS_ON", Related: "SPDXRef-Package-go-toolchain"},
		},
	}
	for i, m := range bin.Modules {
		id := fmt.Sprintf("SPDXRef-Package-gomod-%d", i)
		pkg := SPDXPackage{
			SPDXID:           id,
			Name:             m.Path,
			VersionInfo:      m.Version,
			DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
			PrimaryPurpose:   "LIBRARY",
			ExternalRefs:     []spdxExternalRef{purl(m.Path, m.Version)},
		}
		if m.Sum != "" {
			pkg.SourceInfo = "go.sum " + m.Sum
		}
		if m.ReplacedPath != "" {
			pkg.SourceInfo = strings.TrimSpace("replaces " + m.ReplacedPath + "; " + pkg.SourceInfo)
		}
		doc.Packages = append(doc.Packages, pkg)
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: binaryID, Type: "DEPENDS_ON", Related: id})
	}
	return json.MarshalIndent(doc, "", "  ")
}

// purl is a package URL of the golang type, as SBOM scanners match them.
func purl(path, version string) spdxExternalRef {
	loc := "pkg:golang/" + path
	if version != "" && version != "(devel)" {
		loc += "@" + version
	}
	return spdxExternalRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: loc}
}

// SBOMModules reads the modules back out of an SBOM written by SBOM, the
// way a consumer would: every Go module package the binary depends on.
func SBOMModules(sbom []byte) ([]Module, error) {
	var doc spdxDocument
	if err := json.Unmarshal(sbom, &doc); err != nil {
		return nil, fmt.Errorf("parsing the SBOM: %w", err)
	}
	var out []Module
	for _, p := range doc.Packages {
		if !strings.HasPrefix(p.SPDXID, "SPDXRef-Package-gomod-") {
			continue
		}
		out = append(out, Module{Path: p.Name, Version: p.VersionInfo})
	}
	return out, nil
}
