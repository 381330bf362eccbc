package v2_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/afterhooks/helm-controller/test/upstreamcrd"
)

// schemaNode holds the keywords of one schema node, without its children,
// keyed by their JSON name (type, enum, pattern, default, required,
// x-kubernetes-validations, ...).
type schemaNode map[string]json.RawMessage

// flattenSchema maps every path of a schema ("spec.install.remediation",
// "spec.values", "status.history[]", "spec.x{}") to the node's own keywords.
func flattenSchema(t *testing.T, path string, s *apiextensionsv1.JSONSchemaProps, out map[string]schemaNode) {
	t.Helper()
	if s == nil {
		return
	}
	own := s.DeepCopy()
	own.Properties, own.Items, own.AdditionalProperties = nil, nil, nil
	data, err := json.Marshal(own)
	if err != nil {
		t.Fatalf("marshalling schema at %q: %v", path, err)
	}
	node := schemaNode{}
	if err := json.Unmarshal(data, &node); err != nil {
		t.Fatalf("unmarshalling schema at %q: %v", path, err)
	}
	if len(s.Properties) > 0 {
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		node["(properties)"], _ = json.Marshal(names)
	}
	out[path] = node
	for name, prop := range s.Properties {
		flattenSchema(t, joinPath(path, name), &prop, out)
	}
	if s.Items != nil {
		flattenSchema(t, path+"[]", s.Items.Schema, out)
		for i := range s.Items.JSONSchemas {
			flattenSchema(t, fmt.Sprintf("%s[%d]", path, i), &s.Items.JSONSchemas[i], out)
		}
	}
	if s.AdditionalProperties != nil {
		flattenSchema(t, path+"{}", s.AdditionalProperties.Schema, out)
	}
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// ourAdditions are the only differences our CRD may have from upstream's:
// a waitStrategy property and a CEL rule rejecting afterHooks with
// disableWait on each of install, upgrade and rollback, a
// deleteHookResources property on uninstall with its optional
// deleteHookResourceKinds, and one more
// spec.waitStrategy name (ordered), which only widens its enum, with its
// readinessTimeout, status.sequence, the plan of an ordered action, and
// status.lastHandledPlanAt with status.lastPlan, the answer to a plan
// request (helm.toolkit.fluxcd.io/planRequestedAt), and apiVersion, kind
// and ready on each spec.dependsOn entry, whose descriptions are ours.
// Each is optional, so every manifest upstream accepts is still accepted.
// A new path's children are new with it.
var ourAdditions = map[string][]string{
	"spec.waitStrategy":                      {"(properties)"},
	"spec.waitStrategy.name":                 {"description", "enum"},
	"spec.waitStrategy.readinessTimeout":     {"(new)"},
	"status":                                 {"(properties)"},
	"status.sequence":                        {"(new)"},
	"status.lastHandledPlanAt":               {"(new)"},
	"status.lastPlan":                        {"(new)"},
	"spec.install":                           {"(properties)", "x-kubernetes-validations"},
	"spec.upgrade":                           {"(properties)", "x-kubernetes-validations"},
	"spec.rollback":                          {"(properties)", "x-kubernetes-validations"},
	"spec.install.waitStrategy":              {"(new)"},
	"spec.upgrade.waitStrategy":              {"(new)"},
	"spec.rollback.waitStrategy":             {"(new)"},
	"spec.uninstall":                         {"(properties)"},
	"spec.uninstall.deleteHookResources":     {"(new)"},
	"spec.uninstall.deleteHookResourceKinds": {"(new)"},
	"spec.dependsOn[]":                       {"(properties)", "description"},
	"spec.dependsOn[].name":                  {"description"},
	"spec.dependsOn[].namespace":             {"description"},
	"spec.dependsOn[].readyExpr":             {"description"},
	"spec.dependsOn[].apiVersion":            {"(new)"},
	"spec.dependsOn[].kind":                  {"(new)"},
	"spec.dependsOn[].ready":                 {"(new)"},
}

// underNewPath tells whether path lies below one of our new paths.
func underNewPath(path string) bool {
	for parent := range ourAdditions {
		if allowed(parent, "(new)") && (strings.HasPrefix(path, parent+".") || strings.HasPrefix(path, parent+"[]")) {
			return true
		}
	}
	return false
}

func allowed(path, keyword string) bool {
	for _, k := range ourAdditions[path] {
		if k == keyword {
			return true
		}
	}
	return false
}

func TestCRDIsSupersetOfUpstream(t *testing.T) {
	upstreamPath, err := upstreamcrd.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := upstreamcrd.Load(upstreamPath)
	if err != nil {
		t.Fatal(err)
	}
	oursPath, err := upstreamcrd.OursPath()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := upstreamcrd.Load(oursPath)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("resource", func(t *testing.T) {
		if ours.Name != upstream.Name {
			t.Errorf("name %q, upstream %q", ours.Name, upstream.Name)
		}
		if !reflect.DeepEqual(ours.Spec.Names, upstream.Spec.Names) {
			t.Errorf("names differ:\nours:     %+v\nupstream: %+v", ours.Spec.Names, upstream.Spec.Names)
		}
		if ours.Spec.Group != upstream.Spec.Group || ours.Spec.Scope != upstream.Spec.Scope {
			t.Errorf("group/scope %s/%s, upstream %s/%s", ours.Spec.Group, ours.Spec.Scope, upstream.Spec.Group, upstream.Spec.Scope)
		}
		for k, v := range upstream.Annotations {
			if ours.Annotations[k] != v {
				t.Errorf("annotation %s=%q, upstream %q", k, ours.Annotations[k], v)
			}
		}
		if len(ours.Spec.Versions) != len(upstream.Spec.Versions) {
			t.Fatalf("%d versions, upstream %d", len(ours.Spec.Versions), len(upstream.Spec.Versions))
		}
	})

	for i, uv := range upstream.Spec.Versions {
		ov := ours.Spec.Versions[i]
		t.Run(uv.Name, func(t *testing.T) {
			if ov.Name != uv.Name || ov.Served != uv.Served || ov.Storage != uv.Storage || ov.Deprecated != uv.Deprecated {
				t.Errorf("version %s served=%v storage=%v deprecated=%v, upstream %s served=%v storage=%v deprecated=%v",
					ov.Name, ov.Served, ov.Storage, ov.Deprecated, uv.Name, uv.Served, uv.Storage, uv.Deprecated)
			}
			if !reflect.DeepEqual(ov.Subresources, uv.Subresources) {
				t.Errorf("subresources %+v, upstream %+v", ov.Subresources, uv.Subresources)
			}
			if !reflect.DeepEqual(ov.AdditionalPrinterColumns, uv.AdditionalPrinterColumns) {
				t.Errorf("printer columns %+v, upstream %+v", ov.AdditionalPrinterColumns, uv.AdditionalPrinterColumns)
			}
			compareSchemas(t, uv.Schema.OpenAPIV3Schema, ov.Schema.OpenAPIV3Schema)
		})
	}
}

func compareSchemas(t *testing.T, upstreamSchema, ourSchema *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	upstream, ours := map[string]schemaNode{}, map[string]schemaNode{}
	flattenSchema(t, "", upstreamSchema, upstream)
	flattenSchema(t, "", ourSchema, ours)
	if len(upstream) < 100 {
		t.Fatalf("upstream schema has only %d paths; generation went wrong", len(upstream))
	}

	var diffs []string
	seenAllowed := map[string]bool{}
	for path, un := range upstream {
		on, ok := ours[path]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing in our CRD", path))
			continue
		}
		for _, keyword := range keywords(un, on) {
			u, o := un[keyword], on[keyword]
			if jsonEqual(u, o) {
				continue
			}
			if allowed(path, keyword) {
				seenAllowed[path+" "+keyword] = true
				if keyword == "x-kubernetes-validations" {
					checkRulesKept(t, path, u, o)
				}
				if keyword == "enum" {
					checkEnumWidened(t, path, u, o)
				}
				continue
			}
			diffs = append(diffs, fmt.Sprintf("%s: %s is %s, upstream %s", path, keyword, orNone(o), orNone(u)))
		}
	}
	for path := range ours {
		if _, ok := upstream[path]; ok {
			continue
		}
		if allowed(path, "(new)") {
			seenAllowed[path+" (new)"] = true
			continue
		}
		if underNewPath(path) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s: not in upstream's CRD and not one of our documented additions", path))
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("compared %d upstream schema paths", len(upstream))

	// Every documented addition must actually be there; an addition that
	// silently disappeared is as much a bug as an undocumented one.
	for path, kws := range ourAdditions {
		for _, kw := range kws {
			if !seenAllowed[path+" "+kw] {
				t.Errorf("documented addition %s %s not found in our CRD", path, kw)
			}
		}
	}
}

// checkEnumWidened asserts that where we change an enum, every value
// upstream accepts is still accepted.
func checkEnumWidened(t *testing.T, path string, upstreamRaw, oursRaw json.RawMessage) {
	t.Helper()
	var upstream, ours []string
	if err := json.Unmarshal(upstreamRaw, &upstream); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(oursRaw, &ours); err != nil {
		t.Fatal(err)
	}
	for _, v := range upstream {
		if !slices.Contains(ours, v) {
			t.Errorf("%s: enum %v drops upstream's %q", path, ours, v)
		}
	}
}

// checkRulesKept asserts that where we add CEL rules, upstream's rules are
// all still there, unchanged and in order.
func checkRulesKept(t *testing.T, path string, upstreamRaw, oursRaw json.RawMessage) {
	t.Helper()
	var upstream, ours apiextensionsv1.ValidationRules
	if len(upstreamRaw) > 0 {
		if err := json.Unmarshal(upstreamRaw, &upstream); err != nil {
			t.Fatal(err)
		}
	}
	if err := json.Unmarshal(oursRaw, &ours); err != nil {
		t.Fatal(err)
	}
	if len(ours) != len(upstream)+1 {
		t.Errorf("%s: %d CEL rules, want upstream's %d plus ours", path, len(ours), len(upstream))
		return
	}
	// Ours are appended after upstream's rules (controller-gen emits the
	// embedded type's markers first).
	added := ours[len(ours)-1]
	if !rulesEqual(ours[:len(upstream)], upstream) {
		t.Errorf("%s: upstream's CEL rules changed:\nours:     %+v\nupstream: %+v", path, ours, upstream)
	}
	if !strings.Contains(added.Rule, "afterHooks") || !strings.Contains(added.Rule, "disableWait") {
		t.Errorf("%s: added CEL rule %q is not the afterHooks/disableWait rule", path, added.Rule)
	}
}

func rulesEqual(a, b apiextensionsv1.ValidationRules) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func keywords(a, b schemaNode) []string {
	set := map[string]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var av, bv any
	if json.Unmarshal(a, &av) != nil || json.Unmarshal(b, &bv) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(av, bv)
}

func orNone(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "(absent)"
	}
	s := string(raw)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// previousChanges are the ways upstream's v1.7 API changed a schema node
// of v1.6.5 that still accept every object v1.6.5 accepted (besides prose
// and our own additions): defaults v1.7 dropped (the controller applies
// them instead), and the CEL rules it added to spec.chart, which hold for
// every template v1.6.5 could store (no kind, no url, chart and sourceRef
// set; TestCRDIsSupersetOfUpstream checks they are upstream's own), and
// spec.kubeConfig's two rules (one of the refs, not both) merged into the
// one equivalent rule fluxcd/pkg/apis/meta now declares, same message.
var previousChanges = map[string][]string{
	"spec.chart":                        {"x-kubernetes-validations"},
	"spec.kubeConfig":                   {"x-kubernetes-validations"},
	"spec.chart.spec.version":           {"default"},
	"spec.chart.spec.reconcileStrategy": {"default"},
}

// TestCRDAcceptsWhatPreviousUpstreamAccepted compares our CRD with
// upstream's previous release, v1.6.5 (Flux 2.9): every schema path it had
// is still there, and each difference only widens what is accepted: fewer
// required fields, more properties and enum values, or one of
// previousChanges. test/apiserver checks the same on real API servers.
func TestCRDAcceptsWhatPreviousUpstreamAccepted(t *testing.T) {
	prevPath, err := upstreamcrd.GenerateVersion(t.TempDir(), upstreamcrd.PreviousVersion)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := upstreamcrd.Load(prevPath)
	if err != nil {
		t.Fatal(err)
	}
	oursPath, err := upstreamcrd.OursPath()
	if err != nil {
		t.Fatal(err)
	}
	ours, err := upstreamcrd.Load(oursPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours.Spec.Versions) != len(prev.Spec.Versions) {
		t.Fatalf("%d versions, %s has %d", len(ours.Spec.Versions), upstreamcrd.PreviousVersion, len(prev.Spec.Versions))
	}
	for i, pv := range prev.Spec.Versions {
		t.Run(pv.Name, func(t *testing.T) {
			compareWithPrevious(t, pv.Schema.OpenAPIV3Schema, ours.Spec.Versions[i].Schema.OpenAPIV3Schema)
		})
	}
}

func compareWithPrevious(t *testing.T, prevSchema, ourSchema *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	prev, ours := map[string]schemaNode{}, map[string]schemaNode{}
	flattenSchema(t, "", prevSchema, prev)
	flattenSchema(t, "", ourSchema, ours)
	if len(prev) < 100 {
		t.Fatalf("%s schema has only %d paths; generation went wrong", upstreamcrd.PreviousVersion, len(prev))
	}
	var diffs []string
	for path, pn := range prev {
		on, ok := ours[path]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: missing in our CRD", path))
			continue
		}
		for _, keyword := range keywords(pn, on) {
			if jsonEqual(pn[keyword], on[keyword]) || widens(t, path, keyword, pn[keyword], on[keyword]) {
				continue
			}
			diffs = append(diffs, fmt.Sprintf("%s: %s is %s, %s had %s", path, keyword, orNone(on[keyword]), upstreamcrd.PreviousVersion, orNone(pn[keyword])))
		}
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Error(d)
	}
	t.Logf("compared %d schema paths of %s", len(prev), upstreamcrd.PreviousVersion)
}

// widens tells whether our value of a schema keyword accepts at least what
// the previous release's did.
func widens(t *testing.T, path, keyword string, prevRaw, oursRaw json.RawMessage) bool {
	t.Helper()
	switch keyword {
	case "description":
		return true
	case "required":
		return subset(t, oursRaw, prevRaw)
	case "(properties)", "enum":
		return subset(t, prevRaw, oursRaw)
	}
	return slices.Contains(previousChanges[path], keyword) || allowed(path, keyword)
}

// subset tells whether the JSON string list a holds only values of b.
func subset(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var as, bs []string
	if len(a) > 0 {
		if err := json.Unmarshal(a, &as); err != nil {
			t.Fatal(err)
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &bs); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range as {
		if !slices.Contains(bs, v) {
			return false
		}
	}
	return true
}
