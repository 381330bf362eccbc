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
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/provider"
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

// newKustomizeRenderer prepares the entry's kustomization. An entry
// kustomize refuses whatever the objects (see checkKustomize) is an error,
// reported before Helm renders anything.
func newKustomizeRenderer(field string, spec *helmv2.Kustomize) (*kustomizeRenderer, error) {
	if refused, _ := checkKustomize(field, spec); refused != nil {
		return nil, refused
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

// checkKustomize reads the entry as kustomize will, naming the field at
// fault in every problem. refused holds what kustomize refuses while it
// configures its transformers, before it looks at a single object: an
// install or upgrade with the entry fails whatever the chart renders,
// upstream's as well. warnings holds what fails, or does nothing, only
// on some objects (an operation on a target that matches nothing never
// runs): those are left for kustomize to judge, as upstream does.
func checkKustomize(field string, spec *helmv2.Kustomize) (refused error, warnings []string) {
	var errs []error
	for i, p := range spec.Patches {
		pf := fmt.Sprintf("%s.patches[%d]", field, i)
		patchRefused, patchWarning := checkPatch(p)
		if patchRefused != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pf, patchRefused))
		}
		if patchWarning != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", pf, patchWarning))
		}
		if p.Target != nil {
			if err := validateSelector(*p.Target); err != nil {
				errs = append(errs, fmt.Errorf("%s.target: %w", pf, err))
			}
		}
	}
	for i, img := range spec.Images {
		if strings.TrimSpace(img.Name) == "" {
			warnings = append(warnings, fmt.Sprintf("%s.images[%d].name is empty: the entry changes no image", field, i))
			continue
		}
		// Kustomize pastes the name unquoted into a regular expression.
		// Since kustomize/api v0.21.2 a name that does not compile matches
		// no image (older versions panicked on the first container): the
		// render goes on and the entry silently changes nothing, which the
		// user should hear about.
		if _, err := regexp.Compile("^" + img.Name + "(:[a-zA-Z0-9_.{}-]*)?(@sha256:[a-zA-Z0-9_.{}-]*)?$"); err != nil {
			warnings = append(warnings, fmt.Sprintf("%s.images[%d].name: kustomize reads it as a regular expression, which does not compile, so the entry matches no image and changes nothing: %v", field, i, err))
		}
	}
	return errors.Join(errs...), warnings
}

// checkPatch reads a patch the way kustomize will: refused is what
// kustomize refuses whatever the objects, warning what fails on the
// objects the target selects.
//
// Kustomize tries the patch both as strategic merge patches (YAML objects,
// possibly several documents or a List) and as JSON6902 operations (a
// list), and uses whichever parses; see its PatchTransformer. A strategic
// merge patch needs kind and metadata.name even when a target selects the
// objects, and a target can serve only one of them. A list of operations
// does not name the objects it applies to, so it needs a target; its
// operations are only read when they are applied to an object.
func checkPatch(p kustomize.Patch) (refused, warning error) {
	text := strings.TrimSpace(p.Patch)
	if text == "" {
		return errors.New("patch is empty"), nil
	}
	var parsed any
	if err := yaml.Unmarshal([]byte(text), &parsed); err != nil {
		return fmt.Errorf("patch is not valid YAML: %w", err), nil
	}
	_, isObject := parsed.(map[string]any)
	_, isList := parsed.([]any)
	switch {
	case !isObject && !isList:
		return errors.New("patch must be a strategic merge patch (an object) or a JSON6902 patch (a list of operations)"), nil
	case isList && p.Target == nil:
		return errors.New("a JSON6902 patch (a list of operations) needs a target"), nil
	}

	sm, errSM := patchResources.SliceFromBytes([]byte(text))
	ops, errJSON := decodeJSON6902(text)
	switch {
	case len(sm) > 0 && len(ops) > 0:
		return nil, errors.New("patch reads both as strategic merge patches and as JSON6902 operations")
	case errSM == nil:
		if p.Target != nil && len(sm) > 1 {
			return fmt.Errorf("a target applies to one strategic merge patch, this entry has %d", len(sm)), nil
		}
		return nil, nil
	case errJSON == nil:
		if p.Target == nil {
			return errors.New("a JSON6902 patch (a list of operations) needs a target"), nil
		}
		if err := validateOperations(ops); err != nil {
			return nil, fmt.Errorf("%w; kustomize fails on every object the target selects", err)
		}
		return nil, nil
	case isObject:
		return fmt.Errorf("invalid strategic merge patch: %w", errSM), nil
	default:
		return fmt.Errorf("invalid JSON6902 patch: %w", errJSON), nil
	}
}

// patchResources parses strategic merge patches as kustomize's patch
// transformer does. It holds no state a parse changes.
var patchResources = provider.NewDefaultDepProvider().GetResourceFactory()

// decodeJSON6902 reads JSON6902 operations as kustomize does: text that
// does not start with '[' is YAML.
func decodeJSON6902(text string) (jsonpatch.Patch, error) {
	if !strings.HasPrefix(text, "[") {
		j, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			return nil, err
		}
		text = string(j)
	}
	return jsonpatch.DecodePatch([]byte(text))
}

// validateOperations finds operations the JSON patch library fails on
// whatever the object it is applied to, or panics on (a replace or test of
// the whole object without a value). Pointers are only checked for a '/': the library
// ignores what comes before the first one, and upstream accepts such
// patches.
func validateOperations(ops jsonpatch.Patch) error {
	var errs []error
	for i, op := range ops {
		if err := validateOperation(op); err != nil {
			errs = append(errs, fmt.Errorf("operation %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

func validateOperation(op jsonpatch.Operation) error {
	kind, err := stringField(op, "op")
	if err != nil {
		return err
	}
	switch kind {
	case "add", "remove", "replace", "move", "copy", "test":
	default:
		return fmt.Errorf("op %q is not one of add, remove, replace, move, copy, test", kind)
	}
	path, err := stringField(op, "path")
	if err != nil {
		return err
	}
	switch {
	case path == "" && (kind == "replace" || kind == "test"):
		// The whole object: it becomes, or is compared with, the value,
		// which must therefore be an object.
		var v any
		if raw := op["value"]; raw == nil || json.Unmarshal(*raw, &v) != nil {
			return fmt.Errorf("%s of the whole object (path \"\") needs an object as value", kind)
		}
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("%s of the whole object (path \"\") needs an object as value", kind)
		}
	case !strings.Contains(path, "/"):
		return fmt.Errorf("path %q is not a JSON pointer (/field/...)", path)
	}
	if kind == "move" || kind == "copy" {
		from, err := stringField(op, "from")
		if err != nil {
			return err
		}
		if !strings.Contains(from, "/") {
			return fmt.Errorf("from %q is not a JSON pointer (/field/...)", from)
		}
	}
	return nil
}

func stringField(op jsonpatch.Operation, name string) (string, error) {
	raw := op[name]
	if raw == nil {
		return "", fmt.Errorf("%s is missing", name)
	}
	var s string
	if err := json.Unmarshal(*raw, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", name)
	}
	return s, nil
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
