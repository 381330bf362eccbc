package plancmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// A stream is what `kustomize build` or `flux build kustomization`
// prints: several documents, the HelmReleases among them with the
// sources, ConfigMaps and Secrets they name. Every HelmRelease in it is
// planned, and those other documents stand in for the cluster's copies.

// readInput reads --file, from stdin when it is "-".
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		if stdin == nil {
			return nil, errors.New("reading --file -: no standard input")
		}
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("reading --file -: %w", err)
		}
		return data, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading --file: %w", err)
	}
	return data, nil
}

// splitDocuments splits data at its "---" lines and drops the documents
// holding nothing (comments, blank lines). A document that does not parse
// is kept, for the reader to report.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading --file: %w", err)
		}
		var content map[string]any
		if yaml.Unmarshal(doc, &content) == nil && len(content) == 0 {
			continue
		}
		docs = append(docs, doc)
	}
}

// streamKey names a document of a stream.
type streamKey struct {
	kind      string
	namespace string
	name      string
}

func (k streamKey) String() string { return k.kind + " " + k.namespace + "/" + k.name }

// stream is a multi-document --file, read.
type stream struct {
	// releases are the HelmReleases, in the order they are planned.
	releases []*v2.HelmRelease
	// objects are the documents a plan reads in place of the cluster's
	// copies, as JSON: ConfigMaps, Secrets, HelmRepositories and
	// OCIRepositories.
	objects map[streamKey][]byte
	// ignored are the documents of other kinds, "Kind namespace/name".
	ignored []string
}

// overlaidKinds are the kinds a plan reads from a stream.
var overlaidKinds = map[string]bool{
	"ConfigMap": true, "Secret": true,
	sourcev1.HelmRepositoryKind: true, sourcev1.OCIRepositoryKind: true,
}

// parseStream reads the documents of a stream. A document without a
// namespace is in namespace, as kubectl apply would put it.
func parseStream(path string, docs [][]byte, namespace string) (*stream, error) {
	s := &stream{objects: map[streamKey][]byte{}}
	seen := map[streamKey]bool{}
	for i, doc := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("reading --file %s, document %d: %w", path, i+1, err)
		}
		key := streamKey{kind: head.Kind, namespace: head.Metadata.Namespace, name: head.Metadata.Name}
		if key.namespace == "" {
			key.namespace = namespace
		}
		if seen[key] {
			return nil, fmt.Errorf("reading --file %s: %s appears twice", path, key)
		}
		seen[key] = true
		if err := s.add(path, i, key, doc); err != nil {
			return nil, err
		}
	}
	if len(s.releases) == 0 {
		return nil, fmt.Errorf("reading --file %s: no HelmRelease among its %d documents", path, len(docs))
	}
	ordered, err := dependencyOrder(s.releases)
	if err != nil {
		return nil, fmt.Errorf("reading --file %s: %w", path, err)
	}
	s.releases = ordered
	return s, nil
}

// add files one document of the stream under key.
func (s *stream) add(path string, i int, key streamKey, doc []byte) error {
	switch {
	case key.kind == helmv2.HelmReleaseKind:
		obj, err := readHelmRelease(fmt.Sprintf("%s, document %d", path, i+1), doc)
		if err != nil {
			return err
		}
		obj.Namespace = key.namespace
		s.releases = append(s.releases, obj)
	case overlaidKinds[key.kind]:
		data, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("reading --file %s, document %d: %w", path, i+1, err)
		}
		if key.kind == "Secret" {
			if data, err = withStringData(data); err != nil {
				return fmt.Errorf("reading --file %s, %s: %w", path, key, err)
			}
		}
		s.objects[key] = data
	default:
		s.ignored = append(s.ignored, key.String())
	}
	return nil
}

// withStringData folds a Secret's stringData into its data, as the API
// server does when it stores the Secret.
func withStringData(data []byte) ([]byte, error) {
	secret := &corev1.Secret{}
	if err := yaml.Unmarshal(data, secret); err != nil {
		return nil, err
	}
	if len(secret.StringData) == 0 {
		return data, nil
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	for k, v := range secret.StringData {
		secret.Data[k] = []byte(v)
	}
	secret.StringData = nil
	return json.Marshal(secret)
}

// dependencyOrder orders releases so that each comes after the
// HelmReleases of the stream its spec.dependsOn names (a dependency not
// in the stream is the cluster's, and does not order anything). Releases
// that do not depend on each other keep the stream's order. A cycle is an
// error that names it.
func dependencyOrder(releases []*v2.HelmRelease) ([]*v2.HelmRelease, error) {
	index := map[types.NamespacedName]int{}
	for i, r := range releases {
		index[releaseKey(r)] = i
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]int, len(releases))
	var out []*v2.HelmRelease
	var path []types.NamespacedName
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case done:
			return nil
		case visiting:
			return cycleError(path, releaseKey(releases[i]))
		}
		state[i] = visiting
		path = append(path, releaseKey(releases[i]))
		for _, dep := range releases[i].Spec.DependsOn {
			if !dep.IsHelmRelease() {
				// An object of another kind is no release of the stream.
				continue
			}
			key := types.NamespacedName{Namespace: dep.Namespace, Name: dep.Name}
			if key.Namespace == "" {
				key.Namespace = releases[i].Namespace
			}
			if j, ok := index[key]; ok {
				if err := visit(j); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		out = append(out, releases[i])
		return nil
	}
	for i := range releases {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// releaseKey is a release's namespace and name.
func releaseKey(r *v2.HelmRelease) types.NamespacedName {
	return types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
}

// cycleError names the cycle that closes at back in path.
func cycleError(path []types.NamespacedName, back types.NamespacedName) error {
	start := 0
	for i, p := range path {
		if p == back {
			start = i
		}
	}
	var names []string
	for _, p := range path[start:] {
		names = append(names, p.String())
	}
	names = append(names, back.String())
	return fmt.Errorf("spec.dependsOn of the HelmReleases forms a cycle: %s", strings.Join(names, " -> "))
}

// ignoredSummary says which documents a plan of the stream skipped.
func (s *stream) ignoredSummary() string {
	if len(s.ignored) == 0 {
		return ""
	}
	kinds := map[string]int{}
	for _, id := range s.ignored {
		kind, _, _ := strings.Cut(id, " ")
		kinds[kind]++
	}
	var parts []string
	for kind, n := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, kind))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d documents of other kinds ignored (%s)", len(s.ignored), strings.Join(parts, ", "))
}
