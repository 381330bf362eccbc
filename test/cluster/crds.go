package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const fieldManager = "afterhooks-test-cluster"

// crdManifest is one CustomResourceDefinition document read from a file.
type crdManifest struct {
	name   string
	source string // file it came from, for error messages
	json   []byte
}

// readCRDDirs reads every *.yaml and *.yml file directly inside dirs. Files
// named kustomization.* are skipped: they describe, not define, resources.
func readCRDDirs(dirs []string) ([]crdManifest, error) {
	var out []crdManifest
	for _, dir := range dirs {
		files, err := yamlFiles(dir)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			crds, err := readCRDFile(file)
			if err != nil {
				return nil, err
			}
			out = append(out, crds...)
		}
	}
	return out, nil
}

func yamlFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading CRD directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, "kustomization.") {
			continue
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			files = append(files, filepath.Join(dir, name))
		}
	}
	sort.Strings(files)
	return files, nil
}

func readCRDFile(path string) ([]crdManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening CRD file: %w", err)
	}
	defer f.Close()
	crds, err := parseCRDs(f, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return crds, nil
}

// parseCRDs splits a multi-document YAML stream and keeps every document as
// JSON, refusing anything that is not a CustomResourceDefinition: silently
// skipping a Namespace or RBAC object would hide a mistake.
func parseCRDs(r io.Reader, source string) ([]crdManifest, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []crdManifest
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		crd, err := parseCRD(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		crd.source = source
		out = append(out, crd)
	}
}

func parseCRD(doc []byte) (crdManifest, error) {
	data, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return crdManifest{}, fmt.Errorf("converting YAML to JSON: %w", err)
	}
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return crdManifest{}, fmt.Errorf("decoding object header: %w", err)
	}
	if head.APIVersion != apiextensionsv1.SchemeGroupVersion.String() || head.Kind != "CustomResourceDefinition" {
		return crdManifest{}, fmt.Errorf("only %s CustomResourceDefinitions can be installed, found %s %q",
			apiextensionsv1.SchemeGroupVersion, head.Kind, head.Metadata.Name)
	}
	if head.Metadata.Name == "" {
		return crdManifest{}, errors.New("CustomResourceDefinition has no name")
	}
	return crdManifest{name: head.Metadata.Name, json: data}, nil
}

// stripComments drops comment-only lines so that a document holding nothing
// but a licence header is recognised as empty.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(doc) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			continue
		}
		b.Write(line)
	}
	return b.Bytes()
}

// applyCRDs creates or updates the CRDs with server-side apply, which needs
// no knowledge of whether they already exist.
func applyCRDs(ctx context.Context, client apiextensions.Interface, crds []crdManifest) error {
	force := true
	for _, crd := range crds {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.name,
			types.ApplyPatchType, crd.json, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
		if err != nil {
			return fmt.Errorf("applying CRD %s from %s: %w", crd.name, crd.source, err)
		}
	}
	return nil
}

// waitCRDsEstablished waits until every CRD serves its resources.
func waitCRDsEstablished(ctx context.Context, client apiextensions.Interface, crds []crdManifest) error {
	for _, crd := range crds {
		err := poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !crdEstablished(got) {
				return false, errors.New("not Established and NamesAccepted yet")
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.name, err)
		}
	}
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	established, namesAccepted := false, false
	for _, c := range crd.Status.Conditions {
		switch c.Type {
		case apiextensionsv1.Established:
			established = c.Status == apiextensionsv1.ConditionTrue
		case apiextensionsv1.NamesAccepted:
			namesAccepted = c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return established && namesAccepted
}
