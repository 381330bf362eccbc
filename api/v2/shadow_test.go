package v2_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/google/go-cmp/cmp"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// specShadows are the fields of upstream's HelmReleaseSpec that ours
// declares again: the embedded ones exist, and are always nil.
var specShadows = []string{"DependsOn", "Install", "Rollback", "Uninstall", "Upgrade", "WaitStrategy"}

// shadowAllowed are the functions, by file (slash-separated, from the
// module root) and name, that may reach the shadowed fields, and why.
var shadowAllowed = map[string]string{
	// The random filler sets every field, the shadowed ones included; the
	// test clears them as decoding would.
	"api/v2/roundtrip_test.go TestOursDecodesIntoUpstream": "clears what the random filler set",
}

// TestShadowedFieldsAreExactlyKnown finds every type of this package that
// embeds one of upstream's, and checks which of upstream's fields (by Go or
// JSON name) it declares again. Only HelmReleaseSpec may, and only
// specShadows: a new shadow, by our change or upstream's, must be decided
// on, and added to specShadows (so that TestNoShadowedFieldAccess guards
// it) or renamed.
func TestShadowedFieldsAreExactlyKnown(t *testing.T) {
	want := map[string][]string{
		"HelmReleaseSpec embeds HelmReleaseSpec":     specShadows,
		"HelmReleaseStatus embeds HelmReleaseStatus": nil,
		"Install embeds Install":                     nil,
		"Upgrade embeds Upgrade":                     nil,
		"Rollback embeds Rollback":                   nil,
		"Uninstall embeds Uninstall":                 nil,
	}
	got := map[string][]string{}
	upstreamPkg := reflect.TypeFor[helmv2.HelmRelease]().PkgPath()
	for ours, embedded := range upstreamEmbeddings(reflect.TypeFor[v2.HelmRelease](), upstreamPkg) {
		got[ours.Name()+" embeds "+embedded.Name()] = shadowedFields(ours, embedded)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the types embedding upstream's, or the fields they shadow, changed (-want +got):\n%s", diff)
	}
}

// upstreamEmbeddings maps each struct type of root's package reachable
// from root to the type from upstreamPkg it embeds.
func upstreamEmbeddings(root reflect.Type, upstreamPkg string) map[reflect.Type]reflect.Type {
	found := map[reflect.Type]reflect.Type{}
	seen := map[reflect.Type]bool{}
	var visit func(reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != root.PkgPath() || seen[t] {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			if f.Anonymous && f.Type.PkgPath() == upstreamPkg {
				found[t] = f.Type
			}
			visit(f.Type)
		}
	}
	visit(root)
	return found
}

// shadowedFields are the fields ours declares whose Go or JSON name is one
// of embedded's fields (its own or promoted into it), sorted.
func shadowedFields(ours, embedded reflect.Type) []string {
	names := map[string]bool{}
	for _, f := range reflect.VisibleFields(embedded) {
		names[f.Name] = true
		if name := jsonName(f); name != "" {
			names["json:"+name] = true
		}
	}
	var shadows []string
	for f := range ours.Fields() {
		if f.Anonymous {
			continue
		}
		if names[f.Name] || (jsonName(f) != "" && names["json:"+jsonName(f)]) {
			shadows = append(shadows, f.Name)
		}
	}
	slices.Sort(shadows)
	return shadows
}

// jsonName is f's name in JSON, "" for inlined or skipped fields.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" || (name == "" && f.Anonymous) {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

// TestNoShadowedFieldAccess parses every Go file of the module that the go
// tool would build, generated ones aside, and fails on each selector that
// reaches a shadowed field through the embedded upstream spec
// (x.HelmReleaseSpec.Install) and on each literal that sets one
// (HelmReleaseSpec: helmv2.HelmReleaseSpec{Install: ...}): those fields
// are always nil, and what is set there is lost. Use x.Install (or
// GetInstall) instead, and so on.
func TestNoShadowedFieldAccess(t *testing.T) {
	root := moduleRoot(t)
	used := map[string]bool{}
	var violations []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && ignoredByGoTool(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		found, err := shadowAccesses(path, filepath.ToSlash(rel))
		for _, v := range found {
			if _, ok := shadowAllowed[v.function]; ok {
				used[v.function] = true
				continue
			}
			violations = append(violations, v.String())
		}
		return err
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	for _, v := range violations {
		t.Errorf("%s", v)
	}
	for function := range shadowAllowed {
		if !used[function] {
			t.Errorf("shadowAllowed names %s, which no longer reaches a shadowed field: remove it", function)
		}
	}
}

// ignoredByGoTool tells whether the go tool skips a directory so named.
func ignoredByGoTool(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor"
}

// moduleRoot is the nearest directory above the test's with a go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// shadowAccess is one place that reaches a shadowed field.
type shadowAccess struct {
	pos      token.Position
	rel      string
	function string // "<rel> <function>", the key of shadowAllowed
	what     string
}

func (a shadowAccess) String() string {
	return fmt.Sprintf("%s:%d: %s reaches a shadowed upstream field, always nil: use the field of our spec instead", a.rel, a.pos.Line, a.what)
}

// shadowAccesses lists the accesses to shadowed fields in the file at path
// (rel from the module root); none for a generated file.
func shadowAccesses(path, rel string) ([]shadowAccess, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", rel, err)
	}
	if ast.IsGenerated(file) {
		return nil, nil
	}
	var found []shadowAccess
	for _, decl := range file.Decls {
		function := rel + " " + declName(decl)
		ast.Inspect(decl, func(n ast.Node) bool {
			if what := shadowUse(n); what != "" {
				found = append(found, shadowAccess{pos: fset.Position(n.Pos()), rel: rel, function: function, what: what})
			}
			return true
		})
	}
	return found, nil
}

// declName is a function's name (Type.Method for a method), "" for other
// declarations.
func declName(decl ast.Decl) string {
	fn, ok := decl.(*ast.FuncDecl)
	if !ok {
		return ""
	}
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if ident, ok := recv.(*ast.Ident); ok {
		return ident.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// shadowUse describes n when it reaches a shadowed field: a selector
// x.HelmReleaseSpec.<field>, or a HelmReleaseSpec key whose literal sets
// <field>.
func shadowUse(n ast.Node) string {
	switch n := n.(type) {
	case *ast.SelectorExpr:
		inner, ok := ast.Unparen(n.X).(*ast.SelectorExpr)
		if ok && inner.Sel.Name == "HelmReleaseSpec" && slices.Contains(specShadows, n.Sel.Name) {
			return ".HelmReleaseSpec." + n.Sel.Name
		}
	case *ast.KeyValueExpr:
		key, ok := n.Key.(*ast.Ident)
		if !ok || key.Name != "HelmReleaseSpec" {
			return ""
		}
		if field := shadowSetIn(n.Value); field != "" {
			return "HelmReleaseSpec: {" + field + ": ...}"
		}
	}
	return ""
}

// shadowSetIn is the first shadowed field the literal expr (or &literal)
// sets, "" when none.
func shadowSetIn(expr ast.Expr) string {
	if unary, ok := expr.(*ast.UnaryExpr); ok && unary.Op == token.AND {
		expr = unary.X
	}
	lit, ok := expr.(*ast.CompositeLit)
	if !ok {
		return ""
	}
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if key, ok := kv.Key.(*ast.Ident); ok && slices.Contains(specShadows, key.Name) {
			return key.Name
		}
	}
	return ""
}
