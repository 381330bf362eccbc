// Package upstreamcrd generates the HelmRelease CRD of the upstream
// helm-controller API module this project extends, with the same
// controller-gen our own CRD is generated with. Compatibility tests compare
// our CRD and API server behaviour against it.
package upstreamcrd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// UpstreamAPIPackage is the Go package holding upstream's HelmRelease v2 types.
const UpstreamAPIPackage = "github.com/fluxcd/helm-controller/api/v2"

// FileName is the name controller-gen gives the HelmRelease CRD.
const FileName = "helm.toolkit.fluxcd.io_helmreleases.yaml"

// Generate writes upstream's HelmRelease CRD into dir and returns its path.
// It runs the controller-gen pinned in go.mod from the module root, so the
// upstream API version is the one go.mod requires.
func Generate(dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "tool", "controller-gen", "crd",
		"paths="+UpstreamAPIPackage, "output:crd:dir="+dir)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("controller-gen for %s: %w\n%s", UpstreamAPIPackage, err, out.String())
	}
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("controller-gen did not write %s: %w", FileName, err)
	}
	return path, nil
}

// OursPath returns the path of our committed HelmRelease CRD.
func OursPath() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "config", "crd", "bases", FileName), nil
}

// Load parses a CRD file.
func Load(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(bytes.TrimPrefix(data, []byte("---\n")), &crd); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	return &crd, nil
}

// ModuleRoot returns the directory holding this project's go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
}
