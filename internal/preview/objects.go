package preview

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/kube"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/afterhooks/helm-controller/internal/jobttl"
)

// Object identifies one object of a release manifest.
type Object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Fields are the changed fields of an update, as dotted paths (the
	// manifests compared, not the live object); never their values.
	Fields []string `json:"fields,omitempty"`
	// Live is what applying the object changes in its live copy, from a
	// server-side apply dry run: JSON patch operations and paths ("replace
	// /data/a"), or one of the Live* notes; empty for an object not in the
	// cluster. Never values.
	Live []string `json:"live,omitempty"`
	// SelfDeleting marks a Job with spec.ttlSecondsAfterFinished: once it
	// finishes, Kubernetes deletes it, so a reader (or a check of the
	// outcome) may find it gone although the action made it.
	SelfDeleting bool `json:"selfDeleting,omitempty"`
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + "/" + o.Name
	}
	return o.Kind + "/" + o.Namespace + "/" + o.Name
}

// Objects are what an action does to the objects of a release.
type Objects struct {
	Create    []Object `json:"create,omitempty"`
	Update    []Object `json:"update,omitempty"`
	Unchanged []Object `json:"unchanged,omitempty"`
	Delete    []Object `json:"delete,omitempty"`
	// Keep are the objects the action leaves in the cluster although the
	// release stops managing them (helm.sh/resource-policy: keep).
	Keep []Object `json:"keep,omitempty"`
	// Absent are the objects the action would delete that are not in the
	// cluster (an install that failed before it made them, a deletion by
	// hand): Helm passes over them, so nothing is deleted.
	Absent []Object `json:"absent,omitempty"`
}

// Changes tells whether anything would be created, updated or deleted.
func (o Objects) Changes() bool {
	return len(o.Create)+len(o.Update)+len(o.Delete)+len(o.Keep) > 0
}

// manifestObject is one parsed document of a manifest.
type manifestObject struct {
	id      Object
	content map[string]any
}

// parseManifest reads the objects of a release manifest, keyed by
// identity (API group, kind, namespace, name).
func parseManifest(manifest string) (map[string]manifestObject, error) {
	out := map[string]manifestObject{}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		var content map[string]any
		if err := yaml.Unmarshal([]byte(doc), &content); err != nil {
			return nil, fmt.Errorf("reading the manifest: %w", err)
		}
		if len(content) == 0 {
			continue
		}
		id := identify(content)
		out[key(id)] = manifestObject{id: id, content: content}
	}
	return out, nil
}

func identify(content map[string]any) Object {
	meta, _ := content["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	return Object{APIVersion: str(content, "apiVersion"), Kind: str(content, "kind"),
		Namespace: str(meta, "namespace"), Name: str(meta, "name"), SelfDeleting: jobttl.IsSelfDeleting(&unstructured.Unstructured{Object: content})}
}

// key is the identity of an object across API versions of its group, as
// Helm matches the objects of two revisions.
func key(o Object) string {
	group, _, _ := strings.Cut(o.APIVersion, "/")
	if !strings.Contains(o.APIVersion, "/") {
		group = ""
	}
	return group + "|" + o.Kind + "|" + o.Namespace + "|" + o.Name
}

// compareManifests is what replacing the manifest from with to does: the
// objects only in to are created, those in both updated (or unchanged),
// those only in from deleted, unless they say keep.
func compareManifests(from, to string) (Objects, error) {
	old, err := parseManifest(from)
	if err != nil {
		return Objects{}, err
	}
	next, err := parseManifest(to)
	if err != nil {
		return Objects{}, err
	}
	var objs Objects
	for k, n := range next {
		o, ok := old[k]
		switch {
		case !ok:
			objs.Create = append(objs.Create, n.id)
		case reflect.DeepEqual(o.content, n.content):
			objs.Unchanged = append(objs.Unchanged, n.id)
		default:
			id := n.id
			id.Fields = changedFields(o.content, n.content)
			objs.Update = append(objs.Update, id)
		}
	}
	for k, o := range old {
		if _, ok := next[k]; ok {
			continue
		}
		if keeps(o.content) {
			objs.Keep = append(objs.Keep, o.id)
		} else {
			objs.Delete = append(objs.Delete, o.id)
		}
	}
	objs.sort()
	return objs, nil
}

// keeps tells whether the object says helm.sh/resource-policy: keep.
func keeps(content map[string]any) bool {
	meta, _ := content["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	policy, _ := annotations[kube.ResourcePolicyAnno].(string)
	return policy == kube.KeepPolicy
}

// changedFields lists the dotted paths where the manifests a and b of
// one object differ.
func changedFields(a, b map[string]any) []string {
	var out []string
	walkChanges("", a, b, func(path string) { out = append(out, path) })
	sort.Strings(out)
	return out
}

func (o *Objects) sort() {
	for _, list := range [][]Object{o.Create, o.Update, o.Unchanged, o.Delete, o.Keep, o.Absent} {
		sort.Slice(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
	}
}
