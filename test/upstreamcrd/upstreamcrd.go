// Package upstreamcrd generates the HelmRelease CRD of the upstream
// helm-controller API module this project extends, with the same
// controller-gen our own CRD is generated with. Compatibility tests compare
// our CRD and API server behaviour against it.
package upstreamcrd

import (
	"bytes"
	"encoding/json"
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

// UpstreamAPIModule is the module of upstream's HelmRelease API.
const UpstreamAPIModule = "github.com/fluxcd/helm-controller/api"

// PreviousVersion is the upstream API release before the one go.mod
// requires (the Flux 2.9 line): every HelmRelease it accepted must still be
// accepted, so its CRD is tested against ours too.
const PreviousVersion = "v1.6.5"

// GenerateVersion writes the HelmRelease CRD of another release of
// upstream's API module than go.mod requires into dir and returns its
// path. Two versions of one module cannot be built into one binary, so the
// module is downloaded into the module cache (the go command fetches it
// like any dependency), copied aside and generated there with the
// controller-gen pinned in our go.mod.
func GenerateVersion(dir, version string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "upstream-api-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)

	gen := filepath.Join(work, "controller-gen")
	if err := run(root, "go", "build", "-o", gen, "sigs.k8s.io/controller-tools/cmd/controller-gen"); err != nil {
		return "", err
	}
	out, err := output(work, "go", "mod", "download", "-json", UpstreamAPIModule+"@"+version)
	if err != nil {
		return "", err
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no module directory in %q: %v", UpstreamAPIModule, version, out, err)
	}
	src := filepath.Join(work, "api")
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		return "", fmt.Errorf("copying %s@%s: %w", UpstreamAPIModule, version, err)
	}
	if err := run(src, gen, "crd", "paths=./v2/...", "output:crd:dir="+dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, FileName)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("controller-gen did not write %s for %s: %w", FileName, version, err)
	}
	return path, nil
}

// run runs a command in dir, returning its output in the error.
func run(dir, name string, args ...string) error {
	_, err := output(dir, name, args...)
	return err
}

// output runs a command in dir and returns its standard output.
func output(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// The copied module is its own main module, whatever GOFLAGS says.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
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
