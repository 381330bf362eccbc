package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/go-logr/logr"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/eventlog"
)

// simpleTargetPath is a targetPath whose segments strvals reads as plain
// map keys (no escapes, list indexes or other syntax), so the test knows
// where the value has to end up.
var simpleTargetPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// FuzzComposeValues feeds composeValues everything a HelmRelease author
// controls about one valuesFrom entry (the referenced object's kind, whether
// it and its key exist, the data under the key, valuesKey, targetPath,
// optional, literal) plus spec.values, against a fake API holding the
// object. The values that come out go to Helm, into the release's storage
// record (JSON) and into the config digest, so they must survive JSON, and
// a user must be able to predict them from the documented merge rules.
func FuzzComposeValues(f *testing.F) {
	type seed struct {
		secret, exists, keyPresent bool
		content, valuesKey, target string
		optional, literal          bool
		inline                     string
	}
	for _, s := range []seed{
		// The cases of TestComposeValues.
		{exists: true, keyPresent: true, content: "replicas: 2\n"},
		{secret: true, optional: true},
		{secret: true},
		{exists: true, content: "replicas: 2\n", valuesKey: "other.yaml"},
		// Values files as users write them, inline values on top.
		{exists: true, keyPresent: true, content: "image:\n  repository: nginx\n  tag: \"1.25\"\nresources: {}\n",
			inline: `{"image":{"tag":"1.26"},"replicas":3}`},
		{secret: true, exists: true, keyPresent: true, valuesKey: "values-prod.yaml",
			content: "ingress:\n  enabled: true\n  hosts: [a.example, b.example]\n", inline: `{"ingress":{"enabled":false}}`},
		{exists: true, keyPresent: true, content: "", inline: `{"a":null}`},
		{exists: true, keyPresent: true, content: "~"},
		// Not values: a list, a scalar, broken YAML, values JSON cannot hold.
		{exists: true, keyPresent: true, content: "- a\n- b\n"},
		{exists: true, keyPresent: true, content: "just a string"},
		{exists: true, keyPresent: true, content: "a: [\n"},
		{exists: true, keyPresent: true, content: "a: .inf\n"},
		{exists: true, keyPresent: true, content: "a: &x [*x]\n"},
		{exists: true, keyPresent: true, content: "1: one\ntrue: yes\n"},
		// targetPath: a single value put at a dotted path, as with --set.
		{secret: true, exists: true, keyPresent: true, valuesKey: "password", content: "s3cr3t", target: "auth.password"},
		{exists: true, keyPresent: true, valuesKey: "tag", content: "v1.2.3", target: "image.tag", inline: `{"image":{"repository":"nginx"}}`},
		{exists: true, keyPresent: true, valuesKey: "n", content: "9007199254740993", target: "big"},
		{exists: true, keyPresent: true, valuesKey: "q", content: `"quoted, with comma"`, target: "a.b"},
		{exists: true, keyPresent: true, valuesKey: "l", content: "{x,y}", target: "list"},
		{exists: true, keyPresent: true, valuesKey: "c", content: "x,a=y", target: "a.b"},
		{exists: true, keyPresent: true, valuesKey: "c", content: "null", target: "a"},
		{exists: true, keyPresent: true, valuesKey: "c", content: "x", target: "a.b", inline: `{"a":"scalar"}`},
		{exists: true, keyPresent: true, valuesKey: "c", content: "x", target: "a.b", inline: `{"a":{"b":1,"c":2}}`},
		{exists: true, keyPresent: true, valuesKey: "c", content: "x", target: "a", inline: `{"a":{"b":1}}`},
		// Paths strvals reads as more than map keys.
		{exists: true, keyPresent: true, content: "x", target: `a\.b`},
		{exists: true, keyPresent: true, content: "x", target: "a[0].b"},
		{exists: true, keyPresent: true, content: "x", target: "a[-1]"},
		{exists: true, keyPresent: true, content: "x", target: "a..b"},
		{exists: true, keyPresent: true, content: "x", target: "a=b"},
		{exists: true, keyPresent: true, content: "x", target: "."},
		// literal: the data is the value, byte for byte.
		{secret: true, exists: true, keyPresent: true, valuesKey: "config.json", content: `{"k": [1, 2], "s": "a,b=c\\d"}`,
			target: "app.config", literal: true},
		{exists: true, keyPresent: true, content: "line1\nline2, with {braces} and [brackets]\n", target: "motd", literal: true,
			inline: `{"other":true}`},
		{exists: true, keyPresent: true, content: "", target: "empty", literal: true},
		// Missing key and object, optional or not, with and without a path.
		{exists: true, valuesKey: "absent", optional: true, inline: `{"kept":1}`},
		{secret: true, exists: true, valuesKey: "absent", target: "x.y"},
		{optional: true, target: "x.y", inline: `{"x":{"z":1}}`},
		// spec.values the API server would not store (not an object).
		{exists: true, keyPresent: true, content: "a: 1\n", inline: `[1,2]`},
		{exists: true, keyPresent: true, content: "a: 1\n", inline: `{"a":`},
	} {
		f.Add(s.secret, s.exists, s.keyPresent, s.content, s.valuesKey, s.target, s.optional, s.literal, s.inline)
	}

	f.Fuzz(func(t *testing.T, secret, exists, keyPresent bool, content, valuesKey, targetPath string,
		optional, literal bool, inline string) {
		ref := meta.ValuesReference{Kind: "ConfigMap", Name: "vals", ValuesKey: valuesKey,
			TargetPath: targetPath, Optional: optional, Literal: literal}
		if secret {
			ref.Kind = "Secret"
		}
		objMeta := metav1.ObjectMeta{Namespace: "apps", Name: "vals"}
		var objs []client.Object
		if exists {
			if secret {
				s := &corev1.Secret{ObjectMeta: objMeta, Data: map[string][]byte{"unrelated": []byte("ignored: true")}}
				if keyPresent {
					s.Data[ref.GetValuesKey()] = []byte(content)
				}
				objs = append(objs, s)
			} else {
				cm := &corev1.ConfigMap{ObjectMeta: objMeta, Data: map[string]string{"unrelated": "ignored: true"}}
				if keyPresent {
					cm.Data[ref.GetValuesKey()] = content
				}
				objs = append(objs, cm)
			}
		}
		c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(objs...).Build()
		recorder := eventlog.New(10)
		r := &HelmReleaseReconciler{Client: c, APIReader: c, EventRecorder: recorder}
		obj := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app"}}
		obj.Spec.ValuesFrom = []meta.ValuesReference{ref}
		if inline != "" {
			obj.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(inline)}
		}
		// A fresh copy: the resolver may write into the map it was given.
		inlineValues := obj.Upstream().GetValues()
		ctx := ctrl.LoggerInto(context.Background(), logr.Discard())

		values, err := r.composeValues(ctx, obj)

		// What the resolver reads is what the API returns, not what the
		// test put in (a ConfigMap's invalid UTF-8 does not survive JSON).
		stored, found := storedValuesData(t, c, ref)
		if err != nil {
			checkValuesError(t, obj, recorder, err)
			switch {
			case !found && optional:
				t.Fatalf("missing optional %s reference failed: %v", ref.Kind, err)
			case !exists:
				if !errors.Is(err, chartutil.ErrResourceNotFound) {
					t.Fatalf("missing %s: error %v, want ErrResourceNotFound", ref.Kind, err)
				}
			case !found:
				if !errors.Is(err, chartutil.ErrKeyNotFound) {
					t.Fatalf("missing key %q: error %v, want ErrKeyNotFound", ref.GetValuesKey(), err)
				}
			case targetPath != "":
				if !errors.Is(err, chartutil.ErrValueMerge) {
					t.Fatalf("targetPath %q: error %v, want ErrValueMerge", targetPath, err)
				}
			default:
				if !errors.Is(err, chartutil.ErrValuesDataRead) {
					t.Fatalf("error %v, want ErrValuesDataRead", err)
				}
			}
			return
		}
		if values == nil {
			t.Fatal("no error and nil values")
		}
		if conditions.Has(obj, meta.ReadyCondition) {
			t.Fatalf("Ready set on success: %+v", conditions.Get(obj, meta.ReadyCondition))
		}
		checkJSONRoundTrip(t, values)

		if !found {
			if !optional {
				t.Fatalf("missing non-optional %s reference (object %v) gave values %v", ref.Kind, exists, values)
			}
			// Nothing to merge: spec.values as they are.
			if got, want := mustJSON(t, values), mustJSON(t, orEmpty(inlineValues)); got != want {
				t.Fatalf("optional reference missing: values %s, want spec.values %s", got, want)
			}
			return
		}

		if targetPath == "" {
			fromRef, err := chartcommon.ReadValues(stored)
			if err != nil {
				t.Fatalf("values from unreadable data %q: %v", stored, err)
			}
			// spec.values win over the referenced values, leaf by leaf...
			checkLeaves(t, nil, inlineValues, values)
			// ...and the referenced values nobody overrode stay.
			for k, v := range fromRef {
				if _, overridden := inlineValues[k]; overridden {
					continue
				}
				if got, ok := values[k]; !ok || mustJSON(t, got) != mustJSON(t, v) {
					t.Fatalf("key %q from the reference: got %v (present %v), want %v", k, got, ok, v)
				}
			}
			return
		}

		if !simpleTargetPath.MatchString(targetPath) {
			return
		}
		path := strings.Split(targetPath, ".")
		if inlineTouches(inlineValues, path) {
			// spec.values set something on the path; which one wins
			// depends on the path's depth (see inlineTouches).
			return
		}
		// Without literal, a comma in the data starts another --set
		// assignment, which may replace the path again.
		if !literal && strings.Contains(string(stored), ",") {
			return
		}
		got, ok := lookup(values, path)
		if !ok {
			t.Fatalf("targetPath %q with data %q: not reachable in %v", targetPath, stored, values)
		}
		if literal {
			s, isString := got.(string)
			switch {
			case !isString:
				t.Fatalf("literal targetPath %q: value %#v, want a string", targetPath, got)
			case !utf8.Valid(stored):
				// Values are JSON: bytes that are not UTF-8 cannot be
				// carried and come out as U+FFFD, in Helm and upstream
				// alike. What comes out must still be text.
				if !utf8.ValidString(s) {
					t.Fatalf("literal targetPath %q: value %q is not UTF-8", targetPath, s)
				}
			case s != string(stored):
				t.Fatalf("literal targetPath %q: value %#v, want the data %q as it is", targetPath, got, stored)
			}
		}
	})
}

// storedValuesData reads back the data ref points at, as the resolver sees it.
func storedValuesData(t *testing.T, c client.Client, ref meta.ValuesReference) ([]byte, bool) {
	t.Helper()
	key := client.ObjectKey{Namespace: "apps", Name: ref.Name}
	if ref.Kind == "Secret" {
		var s corev1.Secret
		if err := c.Get(context.Background(), key, &s); err != nil {
			return nil, false
		}
		d, ok := s.Data[ref.GetValuesKey()]
		return d, ok
	}
	var cm corev1.ConfigMap
	if err := c.Get(context.Background(), key, &cm); err != nil {
		return nil, false
	}
	d, ok := cm.Data[ref.GetValuesKey()]
	return []byte(d), ok
}

// checkValuesError: a failure is reported as upstream reports it, Ready=False
// ValuesError with the resolver's message and a Warning event.
func checkValuesError(t *testing.T, obj *v2.HelmRelease, recorder *eventlog.Log, err error) {
	t.Helper()
	ready := conditions.Get(obj, meta.ReadyCondition)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ValuesErrorReason || ready.Message != err.Error() {
		t.Fatalf("error %q: Ready = %+v, want False/%s with the error as message", err, ready, ValuesErrorReason)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, corev1.EventTypeWarning+" "+ValuesErrorReason+" ") {
			t.Fatalf("event %q, want a Warning %s", e, ValuesErrorReason)
		}
	default:
		t.Fatal("no event recorded")
	}
}

// checkJSONRoundTrip: the values encode, decode to a map and encode to the
// same bytes again. Numbers are decoded as json.Number: an int64 from a
// targetPath beyond 2^53 is not lost here (Helm gets the int64), so it must
// not be reported as a loss either.
func checkJSONRoundTrip(t *testing.T, values map[string]any) {
	t.Helper()
	b, err := json.Marshal(values)
	if err != nil {
		t.Fatalf("values %#v do not encode as JSON: %v", values, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var back map[string]any
	if err := dec.Decode(&back); err != nil {
		t.Fatalf("values JSON %s does not decode to a map: %v", b, err)
	}
	again, err := json.Marshal(back)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("values JSON %s re-encodes as %s (%v)", b, again, err)
	}
}

// checkLeaves: every non-map value of want is in got at the same path.
func checkLeaves(t *testing.T, prefix []string, want, got map[string]any) {
	t.Helper()
	for k, w := range want {
		p := append(append([]string(nil), prefix...), k)
		if wm, ok := w.(map[string]any); ok && len(wm) > 0 {
			if gm, ok := got[k].(map[string]any); ok {
				checkLeaves(t, p, wm, gm)
				continue
			}
			// A map in spec.values over a scalar replaces it whole.
		}
		g, ok := got[k]
		if wm, isMap := w.(map[string]any); isMap && len(wm) == 0 {
			// An empty map merges into whatever map is there.
			if _, gotMap := g.(map[string]any); ok && gotMap {
				continue
			}
		}
		if !ok || !reflect.DeepEqual(mustJSON(t, g), mustJSON(t, w)) {
			t.Fatalf("spec.values %s = %s, but the merged values have %s (present %v)",
				strings.Join(p, "."), mustJSON(t, w), mustJSON(t, g), ok)
		}
	}
}

// inlineTouches tells whether spec.values set the targetPath's key or a
// non-map on the way there. The resolver puts the targetPath value into a
// merge of what it has so far with spec.values, and merges spec.values
// once more at the end: spec.values then win at the path's first segment,
// while deeper down the targetPath value was written into the very map
// spec.values hold and wins (fluxcd/pkg/chartutil's behaviour, which
// upstream helm-controller has too). Neither is a property to pin here.
func inlineTouches(inline map[string]any, path []string) bool {
	cur := inline
	for i, seg := range path {
		v, ok := cur[seg]
		if !ok {
			return false
		}
		m, isMap := v.(map[string]any)
		if i == len(path)-1 || !isMap {
			return true
		}
		cur = m
	}
	return false
}

func lookup(values map[string]any, path []string) (any, bool) {
	var cur any = values
	for _, seg := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%#v: %v", v, err)
	}
	return string(b)
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
