package postrender

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/kio"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
	"sigs.k8s.io/yaml"
)

// rendered is Helm output as a post renderer receives it: documents carry
// Helm's filename annotation, which must survive.
const rendered = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
    tier: frontend
  annotations:
    postrenderer.helm.sh/postrender-filename: demo/templates/deployment.yaml
spec:
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.0
      - name: sidecar
        image: ghcr.io/example/sidecar:2.0
---
apiVersion: v1
kind: Service
metadata:
  name: web
  labels:
    app: web
  annotations:
    postrenderer.helm.sh/postrender-filename: demo/templates/service.yaml
spec:
  selector:
    app: web
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    postrenderer.helm.sh/postrender-filename: demo/templates/cm.yaml
    "helm.sh/hook": pre-install
data:
  mode: fast
`

func kustomizeRenderers(ks ...helmv2.Kustomize) []helmv2.PostRenderer {
	var out []helmv2.PostRenderer
	for i := range ks {
		out = append(out, helmv2.PostRenderer{Kustomize: &ks[i]})
	}
	return out
}

func path(p ...string) []string { return p }

// lookup returns the scalar at path in the object kind/name of out, or ""
// when there is none.
func lookup(t *testing.T, out string, kind, name string, path []string) string {
	t.Helper()
	nodes, err := kio.ParseAll(out)
	if err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, out)
	}
	for _, n := range nodes {
		if n.GetKind() != kind || n.GetName() != name {
			continue
		}
		v, err := n.Pipe(kyaml.Lookup(path...))
		if err != nil || v == nil {
			return ""
		}
		return v.YNode().Value
	}
	t.Fatalf("%s/%s missing from output:\n%s", kind, name, out)
	return ""
}

func TestBuild(t *testing.T) {
	type check struct {
		kind, name string
		path       []string
		want       string
	}
	cases := []struct {
		name   string
		spec   helmv2.HelmReleaseSpec
		checks []check
	}{
		{
			name: "origin labels only",
			checks: []check{
				{"Deployment", "web", path("metadata", "labels", "helm.toolkit.fluxcd.io/name"), "podinfo"},
				{"Deployment", "web", path("metadata", "labels", "app"), "web"},
				{"Deployment", "web", path("metadata", "annotations", "postrenderer.helm.sh/postrender-filename"), "demo/templates/deployment.yaml"},
			},
		},
		{
			name: "strategic merge patch without target",
			spec: helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(helmv2.Kustomize{Patches: []kustomize.Patch{{
				Patch: "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n",
			}}})},
			checks: []check{{"Deployment", "web", path("spec", "replicas"), "3"}},
		},
		{
			name: "strategic merge patch with a label selector target",
			spec: helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(helmv2.Kustomize{Patches: []kustomize.Patch{{
				Patch:  "apiVersion: v1\nkind: Any\nmetadata:\n  name: any\n  annotations:\n    patched: \"yes\"\n",
				Target: &kustomize.Selector{LabelSelector: "app=web"},
			}}})},
			checks: []check{
				{"Deployment", "web", path("metadata", "annotations", "patched"), "yes"},
				{"Service", "web", path("metadata", "annotations", "patched"), "yes"},
				{"ConfigMap", "settings", path("metadata", "annotations", "patched"), ""},
			},
		},
		{
			name: "JSON6902 patch with a kind and name target",
			spec: helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(helmv2.Kustomize{Patches: []kustomize.Patch{{
				Patch:  "- op: replace\n  path: /data/mode\n  value: slow\n",
				Target: &kustomize.Selector{Version: "v1", Kind: "ConfigMap", Name: "settings"},
			}}})},
			checks: []check{{"ConfigMap", "settings", path("data", "mode"), "slow"}},
		},
		{
			name: "target by regular expression and annotation selector",
			spec: helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(helmv2.Kustomize{Patches: []kustomize.Patch{{
				Patch:  "- op: add\n  path: /metadata/annotations/matched\n  value: \"true\"\n",
				Target: &kustomize.Selector{Kind: "(Service|ConfigMap)", AnnotationSelector: "helm.sh/hook=pre-install"},
			}}})},
			checks: []check{
				{"ConfigMap", "settings", path("metadata", "annotations", "matched"), "true"},
				{"Service", "web", path("metadata", "annotations", "matched"), ""},
			},
		},
		{
			name: "images: new tag, new name, digest",
			spec: helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(helmv2.Kustomize{Images: []kustomize.Image{
				{Name: "nginx", NewName: "registry.local/nginx", NewTag: "1.27"},
				{Name: "ghcr.io/example/sidecar", Digest: "sha256:0000000000000000000000000000000000000000000000000000000000000001"},
			}})},
			checks: []check{
				{"Deployment", "web", path("spec", "template", "spec", "containers", "[name=web]", "image"), "registry.local/nginx:1.27"},
				{"Deployment", "web", path("spec", "template", "spec", "containers", "[name=sidecar]", "image"), "ghcr.io/example/sidecar@sha256:0000000000000000000000000000000000000000000000000000000000000001"},
			},
		},
		{
			name: "post renderers apply in order",
			spec: helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(
				helmv2.Kustomize{Images: []kustomize.Image{{Name: "nginx", NewName: "mirror/nginx"}}},
				// The second entry sees the first one's result.
				helmv2.Kustomize{Images: []kustomize.Image{{Name: "mirror/nginx", NewTag: "2.0"}}},
			)},
			checks: []check{{"Deployment", "web", path("spec", "template", "spec", "containers", "[name=web]", "image"), "mirror/nginx:2.0"}},
		},
		{
			name: "commonMetadata on every object's metadata only",
			spec: helmv2.HelmReleaseSpec{CommonMetadata: &helmv2.CommonMetadata{
				Labels:      map[string]string{"team": "blue", "tier": "backend"},
				Annotations: map[string]string{"owner": "platform"},
			}},
			checks: []check{
				{"Deployment", "web", path("metadata", "labels", "team"), "blue"},
				{"Deployment", "web", path("metadata", "labels", "tier"), "backend"}, // overrides the chart's value
				{"Deployment", "web", path("metadata", "annotations", "owner"), "platform"},
				{"Deployment", "web", path("spec", "template", "metadata", "labels", "team"), ""},
				{"Deployment", "web", path("spec", "selector", "matchLabels", "team"), ""},
				{"Service", "web", path("spec", "selector", "team"), ""},
				{"Service", "web", path("metadata", "labels", "team"), "blue"},
				{"ConfigMap", "settings", path("metadata", "labels", "team"), "blue"},
				{"ConfigMap", "settings", path("metadata", "annotations", "owner"), "platform"},
			},
		},
		{
			name: "commonMetadata wins over a patch, origin labels over both",
			spec: helmv2.HelmReleaseSpec{
				PostRenderers: kustomizeRenderers(helmv2.Kustomize{Patches: []kustomize.Patch{{
					Patch:  "- op: add\n  path: /metadata/labels/team\n  value: red\n- op: add\n  path: /metadata/labels/helm.toolkit.fluxcd.io~1name\n  value: other\n",
					Target: &kustomize.Selector{Kind: "Service"},
				}}}),
				CommonMetadata: &helmv2.CommonMetadata{Labels: map[string]string{"team": "blue"}},
			},
			checks: []check{
				{"Service", "web", path("metadata", "labels", "team"), "blue"},
				{"Service", "web", path("metadata", "labels", "helm.toolkit.fluxcd.io/name"), "podinfo"},
			},
		},
		{
			name:   "an entry without kustomize does nothing",
			spec:   helmv2.HelmReleaseSpec{PostRenderers: []helmv2.PostRenderer{{}}},
			checks: []check{{"Deployment", "web", path("spec", "template", "spec", "containers", "[name=web]", "image"), "nginx:1.0"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := Build(&tc.spec, "podinfo", "apps")
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			out, err := pr.Run(bytes.NewBufferString(rendered))
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, c := range tc.checks {
				if got := lookup(t, out.String(), c.kind, c.name, c.path); got != c.want {
					t.Errorf("%s/%s %s = %q, want %q", c.kind, c.name, strings.Join(c.path, "."), got, c.want)
				}
			}
			// Every object names its HelmRelease, whatever else ran.
			nodes, _ := kio.ParseAll(out.String())
			if len(nodes) != 3 {
				t.Fatalf("%d objects out, want 3", len(nodes))
			}
			for _, n := range nodes {
				l := n.GetLabels()
				if l[OriginNameLabel] != "podinfo" || l[OriginNamespaceLabel] != "apps" {
					t.Errorf("%s: origin labels %v", describe(n), l)
				}
			}
		})
	}
}

// refusedEntries are entries kustomize refuses while configuring its
// transformers, before it looks at any object; want are fragments of the
// error that must name them.
var refusedEntries = []struct {
	name string
	k    helmv2.Kustomize
	want []string
}{
	{"empty patch", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "  "}}},
		[]string{"spec.postRenderers[0].kustomize.patches[0]", "empty"}},
	{"patch is not YAML", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "{not: [yaml"}}},
		[]string{"patches[0]", "not valid YAML"}},
	{"patch is a scalar", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "just text"}}},
		[]string{"patches[0]", "strategic merge patch"}},
	{"JSON6902 without target", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "- op: remove\n  path: /spec\n"}}},
		[]string{"patches[0]", "needs a target"}},
	{"bad label selector", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "kind: X",
		Target: &kustomize.Selector{LabelSelector: "app in (web"}}}},
		[]string{"patches[0].target", "labelSelector"}},
	{"bad annotation selector", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "kind: X",
		Target: &kustomize.Selector{AnnotationSelector: "=nokey"}}}},
		[]string{"patches[0].target", "annotationSelector"}},
	{"bad regular expression", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "kind: X",
		Target: &kustomize.Selector{Kind: "Deploy(ment"}}}},
		[]string{"patches[0].target", "kind: invalid regular expression"}},
	{"strategic merge patch without kind and name", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "a: 1",
		Target: &kustomize.Selector{Kind: "ConfigMap"}}}},
		[]string{"patches[0]", "invalid strategic merge patch", "missing"}},
	{"strategic merge patch with a null name", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "kind: ConfigMap\nmetadata:\n  name: null\n"}}},
		[]string{"patches[0]", "metadata.name"}},
	{"flow list that is not JSON", helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: "[{op: add, path: /data/x, value: y}]",
		Target: &kustomize.Selector{Kind: "ConfigMap"}}}},
		[]string{"patches[0]", "invalid JSON6902 patch"}},
	{"several strategic merge patches with one target", helmv2.Kustomize{Patches: []kustomize.Patch{{
		Patch:  "kind: ConfigMap\nmetadata:\n  name: a\n---\nkind: ConfigMap\nmetadata:\n  name: b\n",
		Target: &kustomize.Selector{Kind: "ConfigMap"}}}},
		[]string{"patches[0]", "this entry has 2"}},
	{"every problem at once", helmv2.Kustomize{
		Patches: []kustomize.Patch{{Patch: ""}, {Patch: "kind: X", Target: &kustomize.Selector{LabelSelector: "!!"}}},
	}, []string{"patches[0]", "patches[1].target"}},
}

// warnedEntries are entries that fail, or do nothing, only on some
// objects: an operation runs only on what its target selects, an image
// name only on containers.
var warnedEntries = []struct {
	name string
	k    helmv2.Kustomize
	want []string
}{
	{"image without name", helmv2.Kustomize{Images: []kustomize.Image{{NewTag: "1"}}},
		[]string{"images[0].name is empty"}},
	{"image name that is not a regular expression", helmv2.Kustomize{Images: []kustomize.Image{{Name: "nginx(", NewTag: "1"}}},
		[]string{"images[0].name", "regular expression"}},
	{"operations kustomize cannot apply", helmv2.Kustomize{Patches: []kustomize.Patch{{
		Patch: "- op: bogus\n  path: /data\n- op: add\n  value: 1\n- op: copy\n  path: /data/x\n- op: remove\n  path: data\n" +
			"- op: replace\n  path: \"\"\n- op: test\n  path: \"\"\n  value: 5\n- {}\n- op: 1\n",
		Target: &kustomize.Selector{Kind: "ConfigMap"}}}},
		[]string{"patches[0]", "operation 0: op \"bogus\"", "operation 1: path is missing", "operation 2: from is missing",
			"operation 3: path \"data\" is not a JSON pointer", "operation 4: replace of the whole object",
			"operation 5: test of the whole object", "operation 6: op is missing", "operation 7: op must be a string"}},
}

func TestBuildRefusesWhatKustomizeRefuses(t *testing.T) {
	for _, tc := range refusedEntries {
		t.Run(tc.name, func(t *testing.T) {
			spec := helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(tc.k)}
			pr, err := Build(&spec, "n", "ns")
			if err == nil {
				t.Fatalf("Build accepted it (renderer %v)", pr)
			}
			refused, warnings := Check(&spec)
			if refused == nil || refused.Error() != err.Error() || len(warnings) > 0 {
				t.Errorf("Check = %v, %q; want Build's error and no warnings", refused, warnings)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestBuildWarnsWhatDependsOnTheObjects(t *testing.T) {
	for _, tc := range warnedEntries {
		t.Run(tc.name, func(t *testing.T) {
			spec := helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(tc.k)}
			if _, err := Build(&spec, "n", "ns"); err != nil {
				t.Fatalf("Build: %v; upstream runs kustomize on it", err)
			}
			refused, warnings := Check(&spec)
			if refused != nil || len(warnings) != 1 {
				t.Fatalf("Check = %v, %q; want one warning", refused, warnings)
			}
			for _, w := range tc.want {
				if !strings.Contains(warnings[0], w) {
					t.Errorf("warning %q does not mention %q", warnings[0], w)
				}
			}
		})
	}
}

// TestCheckAgreesWithKustomize holds the two classes to kustomize itself,
// run without any of Check's verdicts: a refused entry fails on objects its
// target selects and on objects it does not, a warned entry renders fine
// when there is nothing for it to act on.
func TestCheckAgreesWithKustomize(t *testing.T) {
	// Nothing here has containers or is selected by any target above.
	const unselected = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: other\n"
	run := func(k helmv2.Kustomize, in string) error {
		renderer, err := uncheckedRenderer(&k)
		if err != nil {
			t.Fatal(err)
		}
		_, err = renderer.Run(bytes.NewBufferString(in))
		return err
	}
	for _, tc := range refusedEntries {
		for name, in := range map[string]string{"selected": rendered, "unselected": unselected} {
			if err := run(tc.k, in); err == nil {
				t.Errorf("%s: kustomize rendered %s objects, but Check refuses the entry whatever the objects", tc.name, name)
			}
		}
	}
	for _, tc := range warnedEntries {
		if err := run(tc.k, unselected); err != nil {
			t.Errorf("%s: kustomize fails even with nothing to act on (%v): Check should refuse it", tc.name, err)
		}
	}
}

// uncheckedRenderer is newKustomizeRenderer without its check.
func uncheckedRenderer(spec *helmv2.Kustomize) (*kustomizeRenderer, error) {
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
	config, err := json.Marshal(k)
	return &kustomizeRenderer{field: "entry", config: config}, err
}

// Operations the checks must not refuse: every kind, pointers the JSON
// patch library reads (it ignores what precedes the first '/', and upstream
// accepts that), and a whole-object replace with an object.
func TestBuildAcceptsValidOperations(t *testing.T) {
	patch := `- op: add
  path: /data/a
- op: add
  path: /data/b
  value: x
- op: add
  path: ignored/data/e
  value: y
- op: copy
  from: /data/b
  path: /data/c
- op: move
  from: /data/c
  path: /data/d
- op: test
  path: /data/d
  value: x
- op: test
  path: /data/e
  value: y
- op: remove
  path: /data/a
- op: replace
  path: /data/mode
  value: slow
`
	spec := helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(
		helmv2.Kustomize{Patches: []kustomize.Patch{{Patch: patch, Target: &kustomize.Selector{Kind: "ConfigMap"}}}},
		helmv2.Kustomize{Patches: []kustomize.Patch{{
			Patch:  "[{\"op\": \"replace\", \"path\": \"\", \"value\": {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"settings\"}}}]",
			Target: &kustomize.Selector{Kind: "ConfigMap"},
		}}},
	)}
	pr, err := Build(&spec, "n", "ns")
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	out, err := pr.Run(bytes.NewBufferString(rendered))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := lookup(t, out.String(), "ConfigMap", "settings", path("metadata", "name")); got != "settings" {
		t.Errorf("ConfigMap name %q", got)
	}
}

// A patch that validation cannot judge (it needs the objects) fails the
// run with the entry named, and no partial output.
func TestRunFailsOnPatchThatDoesNotApply(t *testing.T) {
	spec := helmv2.HelmReleaseSpec{PostRenderers: kustomizeRenderers(
		helmv2.Kustomize{Images: []kustomize.Image{{Name: "nginx", NewTag: "2"}}},
		helmv2.Kustomize{Patches: []kustomize.Patch{{
			Patch:  "- op: replace\n  path: /spec/missing/field\n  value: 1\n",
			Target: &kustomize.Selector{Kind: "Deployment"},
		}}},
	)}
	pr, err := Build(&spec, "n", "ns")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pr.Run(bytes.NewBufferString(rendered))
	if err == nil {
		t.Fatalf("Run succeeded:\n%s", out)
	}
	if out != nil {
		t.Errorf("Run returned output with its error:\n%s", out)
	}
	if !strings.Contains(err.Error(), "spec.postRenderers[1].kustomize") {
		t.Errorf("error %q does not name the failing entry", err)
	}
}

// Values YAML would read as booleans, numbers or null stay strings, as
// Kubernetes requires for labels and annotations.
func TestCommonMetadataValuesStayStrings(t *testing.T) {
	values := map[string]string{"a": "true", "b": "1", "c": "", "d": "null", "e": "yes", "f": "plain"}
	spec := helmv2.HelmReleaseSpec{CommonMetadata: &helmv2.CommonMetadata{Labels: values, Annotations: values}}
	pr, err := Build(&spec, "n", "ns")
	if err != nil {
		t.Fatal(err)
	}
	out, err := pr.Run(bytes.NewBufferString(rendered))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out.String(), "\n---\n") {
		var obj struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("labels or annotations are not all strings: %v\n%s", err, doc)
		}
		for k, v := range values {
			if obj.Metadata.Labels[k] != v || obj.Metadata.Annotations[k] != v {
				t.Errorf("%s: label %q, annotation %q, want %q\n%s", k, obj.Metadata.Labels[k], obj.Metadata.Annotations[k], v, doc)
			}
		}
	}
	if strings.Contains(out.String(), "f: 'plain'") {
		t.Error("plain strings are quoted")
	}
}

// A panic inside kustomize fails that render and leaves later renders
// working: Check only warns about this patch, kustomize runs it.
func TestRunSurvivesKustomizePanic(t *testing.T) {
	// The JSON patch library dereferences the missing value.
	bad, err := newKustomizeRenderer("spec.postRenderers[0].kustomize", &helmv2.Kustomize{Patches: []kustomize.Patch{{
		Patch: "- op: replace\n  path: \"\"\n", Target: &kustomize.Selector{Kind: "ConfigMap"}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := bad.Run(bytes.NewBufferString(rendered))
	if err == nil || !strings.Contains(err.Error(), "kustomize panicked") || !strings.Contains(err.Error(), bad.field) {
		t.Fatalf("Run = %v, %v; want an error naming the entry and the panic", out, err)
	}

	good, err := newKustomizeRenderer("spec.postRenderers[0].kustomize", &helmv2.Kustomize{Images: []kustomize.Image{{Name: "nginx", NewTag: "2"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := good.Run(bytes.NewBufferString(rendered)); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("render after the panic: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("render after the panic is stuck: the kustomize lock was not released")
	}
}

// An image name that does not compile as kustomize's regular expression
// matches no container: the render succeeds and changes no image. The
// Warning event (see warnedEntries) is all the user hears, so this test
// fails if kustomize starts to fail or panic on such names again, which
// would make the warning text and docs/postrenderers.md wrong.
func TestImageNameThatDoesNotCompileChangesNothing(t *testing.T) {
	r, err := newKustomizeRenderer("spec.postRenderers[0].kustomize", &helmv2.Kustomize{
		Images: []kustomize.Image{{Name: "nginx(", NewTag: "2"}, {Name: "busybox", NewTag: "9"}}})
	if err != nil {
		t.Fatal(err)
	}
	in := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n" +
		"      - name: a\n        image: nginx:1.0\n      - name: b\n        image: busybox:1.0\n"
	out, err := r.Run(bytes.NewBufferString(in))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := out.String()
	if !strings.Contains(got, "image: nginx:1.0") || !strings.Contains(got, "image: busybox:9") {
		t.Errorf("want nginx unchanged and busybox at tag 9, got\n%s", got)
	}
}
