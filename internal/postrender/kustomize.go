package postrender

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizeRenderer runs one spec.postRenderers[].kustomize entry: a
// kustomization whose only resource is Helm's output, with the entry's
// patches and images.
type kustomizeRenderer struct {
	// field names the entry in error messages.
	field  string
	config []byte
}

// The in-memory kustomization root and the file holding Helm's output.
const (
	kustomizationRoot = "/postrender"
	helmOutputFile    = "helm-output.yaml"
)

// newKustomizeRenderer checks the entry and prepares its kustomization, so
// bad input is reported before Helm renders anything.
func newKustomizeRenderer(field string, spec *helmv2.Kustomize) (*kustomizeRenderer, error) {
	if err := validateKustomize(field, spec); err != nil {
		return nil, err
	}
	k := kustypes.Kustomization{
		TypeMeta:  kustypes.TypeMeta{APIVersion: kustypes.KustomizationVersion, Kind: kustypes.KustomizationKind},
		Resources: []string{helmOutputFile},
	}
	for _, p := range spec.Patches {
		k.Patches = append(k.Patches, kustypes.Patch{Patch: p.Patch, Target: kustomizeSelector(p.Target)})
	}
	for _, img := range spec.Images {
		k.Images = append(k.Images, kustypes.Image{Name: img.Name, NewName: img.NewName, NewTag: img.NewTag, Digest: img.Digest})
	}
	// JSON is YAML, which is what kustomize reads.
	config, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("%s: encoding the kustomization: %w", field, err)
	}
	return &kustomizeRenderer{field: field, config: config}, nil
}

func kustomizeSelector(s *kustomize.Selector) *kustypes.Selector {
	if s == nil {
		return nil
	}
	out := &kustypes.Selector{AnnotationSelector: s.AnnotationSelector, LabelSelector: s.LabelSelector}
	out.Group, out.Version, out.Kind = s.Group, s.Version, s.Kind
	out.Name, out.Namespace = s.Name, s.Namespace
	return out
}

// krustyMu serialises kustomize builds: kustomize keeps package-level state
// (the OpenAPI schema used by strategic merge patches, loaded lazily) that
// is not safe for concurrent first use, and reconciles of different
// HelmReleases run in parallel.
var krustyMu sync.Mutex

func (r *kustomizeRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	fs := filesys.MakeFsInMemory()
	if err := fs.MkdirAll(kustomizationRoot); err != nil {
		return nil, fmt.Errorf("%s: %w", r.field, err)
	}
	if err := fs.WriteFile(kustomizationRoot+"/"+helmOutputFile, in.Bytes()); err != nil {
		return nil, fmt.Errorf("%s: %w", r.field, err)
	}
	if err := fs.WriteFile(kustomizationRoot+"/kustomization.yaml", r.config); err != nil {
		return nil, fmt.Errorf("%s: %w", r.field, err)
	}

	resources, err := runKustomize(fs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.field, err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("%s: writing the result: %w", r.field, err)
	}
	return bytes.NewBuffer(out), nil
}

// runKustomize builds the kustomization under krustyMu. Kustomize, and the
// JSON patch library under it, panic on some inputs (a JSON6902 replace of
// the whole object without a value, for one). Such a panic fails this render
// only: the reconciler recovers panics, so without the deferred unlock the
// mutex would stay held and every later kustomize post renderer in the
// process would wait on it forever.
func runKustomize(fs filesys.FileSystem) (res resmap.ResMap, err error) {
	krustyMu.Lock()
	defer krustyMu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("kustomize panicked: %v", p)
		}
	}()
	return krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, kustomizationRoot)
}

// validateKustomize reports what kustomize would reject or misread, with the
// field at fault, and every such problem at once.
func validateKustomize(field string, spec *helmv2.Kustomize) error {
	var errs []error
	for i, p := range spec.Patches {
		pf := fmt.Sprintf("%s.patches[%d]", field, i)
		if err := validatePatch(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pf, err))
		}
		if p.Target != nil {
			if err := validateSelector(*p.Target); err != nil {
				errs = append(errs, fmt.Errorf("%s.target: %w", pf, err))
			}
		}
	}
	for i, img := range spec.Images {
		if strings.TrimSpace(img.Name) == "" {
			errs = append(errs, fmt.Errorf("%s.images[%d].name: must not be empty", field, i))
		}
	}
	return errors.Join(errs...)
}

// validatePatch checks that a patch is a YAML object (a strategic merge
// patch) or a list (JSON6902 operations), the latter with a target, since a
// list of operations does not name the object it applies to.
func validatePatch(p kustomize.Patch) error {
	if strings.TrimSpace(p.Patch) == "" {
		return errors.New("patch is empty")
	}
	var parsed any
	if err := yaml.Unmarshal([]byte(p.Patch), &parsed); err != nil {
		return fmt.Errorf("patch is not valid YAML: %w", err)
	}
	switch parsed.(type) {
	case map[string]any:
		return nil
	case []any:
		if p.Target == nil {
			return errors.New("a JSON6902 patch (a list of operations) needs a target")
		}
		return nil
	default:
		return errors.New("patch must be a strategic merge patch (an object) or a JSON6902 patch (a list of operations)")
	}
}

// validateSelector checks a target: kustomize reads group, version, kind,
// name and namespace as regular expressions, and the two selectors as
// Kubernetes label selectors.
func validateSelector(s kustomize.Selector) error {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"group", s.Group}, {"version", s.Version}, {"kind", s.Kind}, {"name", s.Name}, {"namespace", s.Namespace},
	} {
		if _, err := regexp.Compile(f.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: invalid regular expression: %w", f.name, err))
		}
	}
	if _, err := labels.Parse(s.LabelSelector); err != nil {
		errs = append(errs, fmt.Errorf("labelSelector: %w", err))
	}
	if _, err := labels.Parse(s.AnnotationSelector); err != nil {
		errs = append(errs, fmt.Errorf("annotationSelector: %w", err))
	}
	return errors.Join(errs...)
}
