package postrender

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// kustomizeRefused are fragments of the errors kustomize reports when
// configuring its transformers fails, before it looks at any object. Build
// refuses such entries before Helm runs; seeing one of these from Run means
// Check let something through.
var kustomizeRefused = []string{
	"trouble configuring builtin",
	"Multiple Strategic-Merge Patches",
}

// kustomizeSelfInflicted are fragments of the errors kustomize (and the
// JSON patch library under it) report for an operation or image that
// cannot work on any object it is applied to. Build accepts such entries,
// since they work when they are applied to nothing, but Check must have
// warned about them.
var kustomizeSelfInflicted = []string{
	"Unexpected kind:",
	"failed to decode path",
	"failed to decode from",
	"kustomize panicked",
}

// fuzzManifest is Helm output as the post renderer receives it: the
// Deployment and Service of the table tests, and a ConfigMap whose name and
// label the fuzzer picks, so selectors have something to match or miss.
// Values the API server would refuse are replaced rather than skipped: the
// property is about what Build accepts, and a skip would starve the fuzzer.
func fuzzManifest(t *testing.T, cmName, appLabel string) string {
	t.Helper()
	if len(validation.IsDNS1123Subdomain(cmName)) > 0 {
		cmName = "settings"
	}
	if len(validation.IsDNS1123Label(appLabel)) > 0 {
		appLabel = "web"
	}
	cm, err := yaml.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":        cmName,
			"labels":      map[string]any{"app": appLabel},
			"annotations": map[string]any{"postrenderer.helm.sh/postrender-filename": "demo/templates/cm.yaml"},
		},
		"data": map[string]any{"mode": "fast"},
	})
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.SplitAfterN(rendered, "---\n", 3)
	return docs[0] + docs[1] + string(cm)
}

type objectID struct{ kind, name string }

func objectIDs(t *testing.T, stream string) []objectID {
	t.Helper()
	nodes, err := kio.ParseAll(stream)
	if err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, stream)
	}
	ids := make([]objectID, 0, len(nodes))
	for _, n := range nodes {
		ids = append(ids, objectID{n.GetKind(), n.GetName()})
	}
	slices.SortFunc(ids, func(a, b objectID) int { return strings.Compare(a.kind+"/"+a.name, b.kind+"/"+b.name) })
	return ids
}

// patchMayRename reports whether a JSON6902 reading of the patch has an
// operation that can change an object's kind or name. The pointer is read
// as the JSON patch library reads it: the first segment is ignored, the
// rest are keys from the top. Anything unreadable counts as "may": this
// only decides whether the strict identity check applies.
func patchMayRename(patch string) bool {
	text := strings.TrimSpace(patch)
	if !strings.HasPrefix(text, "[") {
		j, err := yaml.YAMLToJSON([]byte(text))
		if err != nil {
			return false // not JSON6902 at all
		}
		text = string(j)
	}
	ops, err := jsonpatch.DecodePatch([]byte(text))
	if err != nil {
		return false
	}
	for _, op := range ops {
		for _, field := range []string{"path", "from"} {
			raw, ok := op[field]
			if !ok {
				continue
			}
			var p string
			if raw == nil || yaml.Unmarshal(*raw, &p) != nil {
				return true
			}
			segs := strings.Split(p, "/")
			if len(segs) < 2 {
				return true // the whole document
			}
			segs = segs[1:]
			for i := range segs {
				segs[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i])
			}
			key := strings.Join(segs, "\x00")
			switch key {
			case "kind", "metadata", "metadata\x00name":
				return true
			}
		}
	}
	return false
}

// patchHasDirective reports whether a strategic merge reading of the patch
// carries a $-directive ($patch: delete and the like), the only way such a
// patch removes an object. Keys are compared decoded, so a quoted or escaped
// spelling of $patch counts too.
func patchHasDirective(patch string) bool {
	nodes, err := kio.FromBytes([]byte(patch))
	if err != nil {
		return strings.Contains(patch, "$")
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if strings.HasPrefix(k, "$") || walk(e) {
					return true
				}
			}
		case []any:
			return slices.ContainsFunc(v, walk)
		}
		return false
	}
	for _, n := range nodes {
		m, err := n.Map()
		if err != nil || walk(m) {
			return true
		}
	}
	return false
}

// FuzzBuild feeds one kustomize entry (a patch with an optional target, an
// image) and commonMetadata to Build, and runs what Build accepts on a small
// manifest. What must hold:
//   - Build never panics, and a refusal names the entry and field at fault;
//   - Run never panics and never fails while kustomize configures itself
//     (see kustomizeRefused): the controller stalls on such entries before
//     any Helm action, as every install and upgrade would fail on them;
//   - when Run fails for a reason the operation or image carries on its own
//     (see kustomizeSelfInflicted), Check has warned about the entry;
//   - a successful Run returns YAML that parses, holds the same objects as
//     its input (the same count, and the same kinds and names unless a JSON
//     patch rewrites /kind or /metadata/name; fewer only through a strategic
//     merge $patch directive), and every object carries commonMetadata's
//     label and the origin labels, the latter winning.
func FuzzBuild(f *testing.F) {
	type seed struct {
		patch                                              string
		target                                             bool
		group, version, kind, name, namespace, labels, ann string
		cmName, appLabel                                   string
		image, newTag                                      string
		mdKey, mdValue                                     string
	}
	seeds := []seed{
		// From TestBuild.
		{patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n"},
		{patch: "apiVersion: v1\nkind: Any\nmetadata:\n  name: any\n  annotations:\n    patched: \"yes\"\n", target: true, labels: "app=web"},
		{patch: "- op: replace\n  path: /data/mode\n  value: slow\n", target: true, version: "v1", kind: "ConfigMap", name: "settings"},
		{patch: "- op: add\n  path: /metadata/annotations/matched\n  value: \"true\"\n", target: true, kind: "(Service|ConfigMap)", ann: "postrenderer.helm.sh/postrender-filename=demo/templates/cm.yaml"},
		{patch: "- op: add\n  path: /metadata/labels/helm.toolkit.fluxcd.io~1name\n  value: other\n", target: true, kind: "Service", mdKey: "team", mdValue: "blue"},
		{image: "nginx", newTag: "1.27"},
		{image: "ghcr.io/example/sidecar", newTag: "2.0", mdKey: OriginNameLabel, mdValue: "someone-else"},
		{mdKey: "tier", mdValue: "true"},
		// From TestBuildRejectsBadInput.
		{patch: "  "},
		{patch: "{not: [yaml"},
		{patch: "just text"},
		{patch: "- op: remove\n  path: /spec\n"},
		{patch: "kind: X", target: true, labels: "app in (web"},
		{patch: "kind: X", target: true, ann: "=nokey"},
		{patch: "kind: X", target: true, kind: "Deploy(ment"},
		{image: " ", newTag: "1"},
		// Found by this target: kustomize compiles the image name into a
		// regular expression, ignores the error and panics.
		{image: "(", target: true, version: "0", labels: "0"},
		// From TestRunFailsOnPatchThatDoesNotApply: fails on these objects
		// only, which Build cannot know.
		{patch: "- op: replace\n  path: /spec/missing/field\n  value: 1\n", target: true, kind: "Deployment"},
		// Deleting, renaming and retargeting.
		{patch: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n$patch: delete\n"},
		{patch: "- op: replace\n  path: /metadata/name\n  value: renamed\n", target: true, kind: "ConfigMap", cmName: "cfg"},
		{patch: "- op: move\n  from: /data/mode\n  path: /data/speed\n", target: true, kind: "ConfigMap", labels: "app=api", appLabel: "api"},
		{patch: "[{\"op\": \"copy\", \"from\": \"/metadata/labels\", \"path\": \"/metadata/annotations\"}]", target: true, namespace: ".*"},
		// Accepted by YAML but not by kustomize: no kind and name, a
		// flow-style list that is not JSON, several patches sharing one
		// target, unknown or incomplete operations, replacing or testing the
		// whole object without a value (which panics the JSON patch library).
		{patch: "a: 1", target: true, kind: "ConfigMap"},
		{patch: "kind: ConfigMap\nmetadata:\n  name: null\n", target: true, kind: "ConfigMap"},
		{patch: "[{op: add, path: /data/x, value: y}]", target: true, kind: "ConfigMap"},
		{patch: "kind: ConfigMap\nmetadata:\n  name: a\n---\nkind: ConfigMap\nmetadata:\n  name: b\n", target: true, kind: "ConfigMap"},
		{patch: "- op: bogus\n  path: /data\n", target: true, kind: "ConfigMap"},
		{patch: "- op: add\n  value: 1\n", target: true, kind: "ConfigMap"},
		{patch: "- op: copy\n  path: /data/x\n", target: true, kind: "ConfigMap"},
		{patch: "- 1\n", target: true},
		{patch: "- op: replace\n  path: \"\"\n", target: true, kind: "ConfigMap"},
		{patch: "- op: test\n  path: \"\"\n", target: true, kind: "ConfigMap"},
	}
	for _, s := range seeds {
		f.Add(s.patch, s.target, s.group, s.version, s.kind, s.name, s.namespace, s.labels, s.ann,
			s.cmName, s.appLabel, s.image, s.newTag, s.mdKey, s.mdValue)
	}
	f.Fuzz(func(t *testing.T, patch string, target bool, group, version, kind, name, namespace, labelSel, annSel,
		cmName, appLabel, image, newTag, mdKey, mdValue string) {
		// A HelmRelease reaches Build decoded from JSON, whose decoder
		// replaces invalid UTF-8; the fuzzer's raw bytes would otherwise
		// only find what YAML does with them (a !!binary key, for one).
		for _, s := range []*string{&patch, &group, &version, &kind, &name, &namespace, &labelSel, &annSel,
			&cmName, &appLabel, &image, &newTag, &mdKey, &mdValue} {
			*s = strings.ToValidUTF8(*s, "\uFFFD")
		}
		var k helmv2.Kustomize
		if patch != "" {
			p := kustomize.Patch{Patch: patch}
			if target {
				p.Target = &kustomize.Selector{
					Group: group, Version: version, Kind: kind, Name: name, Namespace: namespace,
					LabelSelector: labelSel, AnnotationSelector: annSel,
				}
			}
			k.Patches = append(k.Patches, p)
		}
		if image != "" {
			k.Images = append(k.Images, kustomize.Image{Name: image, NewTag: newTag})
		}
		spec := helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(k)}
		wantLabels := map[string]string{}
		if mdKey != "" {
			spec.CommonMetadata = &helmv2.CommonMetadata{Labels: map[string]string{mdKey: mdValue}}
			wantLabels[mdKey] = mdValue
		}
		wantLabels[OriginNameLabel], wantLabels[OriginNamespaceLabel] = "podinfo", "apps"

		pr, err := Build(&spec, "podinfo", "apps")
		if err != nil {
			msg := err.Error()
			if !strings.HasPrefix(msg, "invalid post renderer: ") ||
				(!strings.Contains(msg, "spec.postRenderers[0].kustomize.patches[0]") &&
					!strings.Contains(msg, "spec.postRenderers[0].kustomize.images[0]")) {
				t.Fatalf("Build error does not name the entry at fault: %v", err)
			}
			return
		}

		in := fuzzManifest(t, cmName, appLabel)
		out, err := pr.Run(bytes.NewBufferString(in))
		if err != nil {
			for _, m := range kustomizeRefused {
				if strings.Contains(err.Error(), m) {
					t.Fatalf("Build accepted an entry kustomize refuses whatever the objects; Run: %v", err)
				}
			}
			_, warnings := Check(&spec)
			for _, m := range kustomizeSelfInflicted {
				if strings.Contains(err.Error(), m) && len(warnings) == 0 {
					t.Fatalf("Check did not warn about an entry that cannot work on the objects it selects; Run: %v", err)
				}
			}
			if out != nil {
				t.Fatalf("Run returned output with its error %v", err)
			}
			return
		}

		got, want := objectIDs(t, out.String()), objectIDs(t, in)
		switch {
		case patchHasDirective(patch):
			if len(got) > len(want) {
				t.Fatalf("objects %v out of %v", got, want)
			}
		case patchMayRename(patch):
			if len(got) != len(want) {
				t.Fatalf("objects %v out of %v", got, want)
			}
		default:
			if !slices.Equal(got, want) {
				t.Fatalf("objects %v out of %v", got, want)
			}
		}

		nodes, err := kio.ParseAll(out.String())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			l := n.GetLabels()
			for k, v := range wantLabels {
				if got, ok := l[k]; !ok || got != v {
					t.Fatalf("%s: label %q = %q, want %q\n%s", describe(n), k, got, v, mustString(n))
				}
			}
		}
	})
}

func mustString(n *kyaml.RNode) string {
	s, err := n.String()
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return s
}
