package dist

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Release asset names, as upstream helm-controller publishes them, so
// Flux's manifests/bases/helm-controller can point at ours.
const (
	CRDsAsset       = "helm-controller.crds.yaml"
	DeploymentAsset = "helm-controller.deployment.yaml"
)

// Manifests renders the two release assets: the CRD from config/crd, and
// the Deployment from config/manager with the image pinned to
// Repository:version@digest.
func Manifests(root, version, digest string) (map[string][]byte, error) {
	if version == "" || digest == "" {
		return nil, fmt.Errorf("release manifests need the image version and digest")
	}
	crds, err := kustomizeBuild(filepath.Join(root, "config", "crd"))
	if err != nil {
		return nil, err
	}
	// A throwaway kustomization over config/manager pins the image the
	// way kustomize does everywhere else (images: newTag + digest).
	tmp, err := os.MkdirTemp("", "helm-controller-manifests-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// kustomize takes only relative paths to other kustomizations.
	abs, err := filepath.Abs(filepath.Join(root, "config", "manager"))
	if err != nil {
		return nil, err
	}
	manager, err := filepath.Rel(tmp, abs)
	if err != nil {
		return nil, err
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newTag: %s
    digest: %s
`, manager, Repository, version, digest)
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	deploy, err := kustomizeBuild(tmp)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CRDsAsset: crds, DeploymentAsset: deploy}, nil
}

func kustomizeBuild(dir string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return m.AsYaml()
}

// WriteManifests writes the release assets into dir.
func WriteManifests(dir string, assets map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range assets {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}
