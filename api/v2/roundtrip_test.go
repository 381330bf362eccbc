package v2_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

const roundTrips = 300

// newFiller returns a filler that produces objects the JSON encoding can
// represent: whole-second UTC times and valid JSON for free-form fields.
func newFiller(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 3).Funcs(
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Unix(c.Int63n(4_000_000_000), 0).Rfc3339Copy()
		},
		func(j *apiextensionsv1.JSON, c randfill.Continue) {
			j.Raw = []byte(fmt.Sprintf(`{"key%d":%q,"nested":{"n":%d}}`, c.Intn(10), c.String(8), c.Intn(1000)))
		},
		func(m *metav1.ObjectMeta, c randfill.Continue) {
			m.Name, m.Namespace = c.String(10), c.String(10)
			c.Fill(&m.Labels)
			c.Fill(&m.Annotations)
			m.Generation = c.Int63()
			m.ResourceVersion = fmt.Sprint(c.Uint32())
		},
	)
}

// TestUpstreamRoundTrip fills upstream HelmRelease objects at random and
// checks that upstream JSON decoded into our type and encoded again decodes
// into the same upstream object, and produces the same JSON document.
func TestUpstreamRoundTrip(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := newFiller(seed)
	for i := 0; i < roundTrips; i++ {
		var filled helmv2.HelmRelease
		f.Fill(&filled)
		// Some filled values have no JSON form of their own (a pointer to a
		// nil slice, for one); upstream's own round trip drops them too, so
		// it is the baseline ours must match.
		var original helmv2.HelmRelease
		mustUnmarshal(t, mustMarshal(t, &filled), &original)
		upstreamJSON := mustMarshal(t, &original)
		var ours v2.HelmRelease
		mustUnmarshal(t, upstreamJSON, &ours)
		oursJSON := mustMarshal(t, &ours)

		var back helmv2.HelmRelease
		mustUnmarshal(t, oursJSON, &back)
		if !apiequality.Semantic.DeepEqual(&original, &back) {
			t.Fatalf("round trip %d lost data:\nupstream JSON: %s\nvia ours:      %s", i, upstreamJSON, oursJSON)
		}
		if !sameDocument(t, upstreamJSON, oursJSON) {
			t.Fatalf("round trip %d changed the JSON document:\nupstream: %s\nours:     %s", i, upstreamJSON, oursJSON)
		}
		if !apiequality.Semantic.DeepEqual(&original.Spec, &ours.Upstream().Spec) {
			t.Fatalf("round trip %d: Upstream() view differs from the decoded upstream object", i)
		}
	}
}

// TestOursDecodesIntoUpstream fills our objects at random, with
// waitStrategy and deleteHookResources set, and checks that upstream's type
// decodes them into our Upstream() view: nothing but those is lost.
func TestOursDecodesIntoUpstream(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := newFiller(seed)
	strategies := []v2.HookWaitStrategy{"", v2.BeforeHooks, v2.AfterHooks}
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < roundTrips; i++ {
		var filled v2.HelmRelease
		f.Fill(&filled)
		var ours v2.HelmRelease
		mustUnmarshal(t, mustMarshal(t, &filled), &ours) // baseline: see TestUpstreamRoundTrip
		// The shadowed upstream fields never carry data; see HelmReleaseSpec.
		ours.Spec.HelmReleaseSpec.Install, ours.Spec.HelmReleaseSpec.Upgrade, ours.Spec.HelmReleaseSpec.Rollback = nil, nil, nil
		ours.Spec.HelmReleaseSpec.Uninstall = nil
		for _, ws := range []*v2.HookWaitStrategy{waitStrategyOf(ours.Spec.Install), waitStrategyOf(ours.Spec.Upgrade), waitStrategyOf(ours.Spec.Rollback)} {
			if ws != nil {
				*ws = strategies[rng.Intn(len(strategies))]
			}
		}

		oursJSON := mustMarshal(t, &ours)
		var upstream helmv2.HelmRelease
		mustUnmarshal(t, oursJSON, &upstream)
		want := ours.Upstream()
		want.TypeMeta = ours.TypeMeta
		if !apiequality.Semantic.DeepEqual(want, &upstream) {
			t.Fatalf("object %d: upstream decoded more than our additions differently:\n%s", i, cmp.Diff(want, &upstream))
		}

		var again v2.HelmRelease
		mustUnmarshal(t, oursJSON, &again)
		if !apiequality.Semantic.DeepEqual(&ours, &again) {
			t.Fatalf("object %d did not survive our own round trip:\n%s", i, oursJSON)
		}
	}
}

func waitStrategyOf(action any) *v2.HookWaitStrategy {
	switch a := action.(type) {
	case *v2.Install:
		if a != nil {
			return &a.WaitStrategy
		}
	case *v2.Upgrade:
		if a != nil {
			return &a.WaitStrategy
		}
	case *v2.Rollback:
		if a != nil {
			return &a.WaitStrategy
		}
	}
	return nil
}

// TestDeepCopyIsDeep mutates a deep copy at random and checks the original
// is untouched, so no pointer, slice or map is shared.
func TestDeepCopyIsDeep(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	f := newFiller(seed)
	for i := 0; i < roundTrips; i++ {
		var original v2.HelmRelease
		f.Fill(&original)
		before := mustMarshal(t, &original)

		copied := original.DeepCopy()
		if !apiequality.Semantic.DeepEqual(&original, copied) {
			t.Fatalf("object %d: deep copy differs from the original", i)
		}
		scribble(reflect.ValueOf(copied).Elem())
		if after := mustMarshal(t, &original); string(after) != string(before) {
			t.Fatalf("object %d: changing the copy changed the original:\nbefore: %s\nafter:  %s", i, before, after)
		}
	}
}

// scribble overwrites every string, number and bool reachable from v, in
// place, following pointers, slices and maps.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			for i := 0; i < v.Len(); i++ {
				v.Index(i).SetUint(uint64('x'))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			scribble(v.Index(i))
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			scribble(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			elem := reflect.New(v.Type().Elem()).Elem()
			elem.Set(v.MapIndex(k))
			scribble(elem)
			v.SetMapIndex(k, elem)
		}
	case reflect.String:
		v.SetString(v.String() + "-changed")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1)
	}
}

func sameDocument(t *testing.T, a, b []byte) bool {
	t.Helper()
	var av, bv any
	mustUnmarshal(t, a, &av)
	mustUnmarshal(t, b, &bv)
	return reflect.DeepEqual(av, bv)
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return data
}

func mustUnmarshal(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("unmarshal: %v\n%s", err, data)
	}
}
