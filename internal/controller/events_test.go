package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/afterhooks/helm-controller/internal/runner"
)

// Event types as Kubernetes and Flux name them.
const (
	typeNormal  = "Normal"
	typeWarning = "Warning"
	typeTrace   = "Trace"
)

// emission is one place in the source that emits an event.
type emission struct {
	at, eventType, reason string
}

// eventHelpers are the functions that emit an event of a fixed type, with
// the position of their reason argument.
var eventHelpers = map[string]struct {
	eventType   string
	reasonIndex int
}{
	"normal":             {typeNormal, 2},  // reconcile.Machine.normal(req, s, reason, msg)
	"warning":            {typeWarning, 2}, // reconcile.Machine.warning(req, s, reason, msg)
	"fail":               {typeWarning, 2}, // fail(obj, action, reason, err)
	"stallOnInvalidSpec": {typeWarning, 2}, // stallOnInvalidSpec(obj, action, reason, err)
	"warnSpec":           {typeWarning, 2}, // warnSpec(ctx, obj, reason, warnings)
}

// scanEmissions finds every event the controller's own code emits with a
// type and a reason that are known in the source: a call that passes an
// event type constant and, right after it, the reason, or a call of one of
// eventHelpers. Reasons held in variables are those of a helper's caller,
// which is scanned itself.
func scanEmissions(t *testing.T, helpers bool, dirs ...string) []emission {
	t.Helper()
	fset := token.NewFileSet()
	consts := map[string]map[string]string{} // package name → constant → value
	var files []*ast.File
	for _, dir := range dirs {
		paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			collectStringConsts(f, consts)
		}
	}
	if helpers {
		checkHelpers(t, files)
	}
	var found []emission
	for _, f := range files {
		local := consts[f.Name.Name]
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			vars := reasonVariables(fn.Body, local, consts)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				eventType, reasonExpr := emittedEvent(call, helpers)
				if eventType == "" || reasonExpr == nil {
					return true
				}
				reasons := []string{reasonOf(reasonExpr, local, consts)}
				if id, ok := reasonExpr.(*ast.Ident); ok && reasons[0] == "" {
					reasons = vars[id.Name]
				}
				for _, reason := range reasons {
					if reason != "" {
						found = append(found, emission{at: fset.Position(call.Pos()).String(), eventType: eventType, reason: reason})
					}
				}
				return true
			})
		}
	}
	return found
}

func collectStringConsts(f *ast.File, consts map[string]map[string]string) {
	pkg := f.Name.Name
	if consts[pkg] == nil {
		consts[pkg] = map[string]string{}
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil {
						consts[pkg][name.Name] = v
					}
				}
			}
		}
	}
}

// checkHelpers makes sure each of eventHelpers is defined in the scanned
// files and emits the type the table says, so the table cannot lie.
func checkHelpers(t *testing.T, files []*ast.File) {
	t.Helper()
	emits := map[string][]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if _, ok := eventHelpers[fn.Name.Name]; !ok {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if e, ok := n.(ast.Expr); ok {
					if typ := eventTypeOf(e); typ != "" {
						emits[fn.Name.Name] = append(emits[fn.Name.Name], typ)
					}
				}
				return true
			})
		}
	}
	for name, h := range eventHelpers {
		if !slices.Equal(emits[name], []string{h.eventType}) {
			t.Errorf("helper %s emits %v, the scan assumes %s", name, emits[name], h.eventType)
		}
	}
}

// reasonVariables are the reason constants each variable of a function
// body is assigned, e.g. reason := FactoryErrorReason; if … { reason = … }.
func reasonVariables(body *ast.BlockStmt, local map[string]string, consts map[string]map[string]string) map[string][]string {
	vars := map[string][]string{}
	ast.Inspect(body, func(n ast.Node) bool {
		assign, ok := n.(*ast.AssignStmt)
		if !ok || len(assign.Lhs) != len(assign.Rhs) {
			return true
		}
		for i, lhs := range assign.Lhs {
			id, ok := lhs.(*ast.Ident)
			if !ok {
				continue
			}
			if _, lit := assign.Rhs[i].(*ast.BasicLit); lit {
				continue // a message, not a reason constant
			}
			if reason := reasonOf(assign.Rhs[i], local, consts); reason != "" {
				vars[id.Name] = append(vars[id.Name], reason)
			}
		}
		return true
	})
	return vars
}

// emittedEvent is the type and the reason expression of an event call.
func emittedEvent(call *ast.CallExpr, helpers bool) (string, ast.Expr) {
	if sel, ok := call.Fun.(*ast.SelectorExpr); ok && helpers {
		if h, ok := eventHelpers[sel.Sel.Name]; ok && len(call.Args) > h.reasonIndex {
			return h.eventType, call.Args[h.reasonIndex]
		}
	}
	for i, arg := range call.Args[:max(0, len(call.Args)-1)] {
		if eventType := eventTypeOf(arg); eventType != "" {
			return eventType, call.Args[i+1]
		}
	}
	return "", nil
}

func eventTypeOf(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	switch {
	case !ok:
		return ""
	case pkg.Name == "corev1" && sel.Sel.Name == "EventTypeNormal":
		return typeNormal
	case pkg.Name == "corev1" && sel.Sel.Name == "EventTypeWarning":
		return typeWarning
	case pkg.Name == "eventv1" && sel.Sel.Name == "EventTypeTrace":
		return typeTrace
	}
	return ""
}

// reasonOf resolves a reason: a string, a constant of the scanned packages,
// or a reason constant of Flux's API packages, whose values are their names
// without the "Reason" suffix. Anything else (a variable) is "".
func reasonOf(e ast.Expr, local map[string]string, consts map[string]map[string]string) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		v, _ := strconv.Unquote(e.Value)
		return v
	case *ast.Ident:
		return local[e.Name]
	case *ast.SelectorExpr:
		pkg, ok := e.X.(*ast.Ident)
		if !ok {
			return ""
		}
		if scanned, ok := consts[pkg.Name]; ok {
			return scanned[e.Sel.Name]
		}
		if name, ok := strings.CutSuffix(e.Sel.Name, "Reason"); ok {
			return name
		}
	}
	return ""
}

// progressReasons are our events that report progress, not an outcome:
// they must be Trace, which notification-controller never receives, as
// upstream's progress events (its chart template events).
var progressReasons = []string{
	runner.AfterHooksStartedReason,
	runner.AfterHooksWaitingReason,
	runner.ResourceGroupAppliedReason,
	runner.ResourceGroupReadyReason,
	runner.ResourceGroupDeletingReason,
}

// ourOutcomeReasons are the events of ours that upstream does not emit and
// that report an outcome (Normal or Warning): what was done, refused or
// went wrong.
var ourOutcomeReasons = []string{
	"DriftDetectionFailed", "ChartMutateError", "FactoryError", "RESTClientError", "ReconciliationFailed", "StateError",
	"SourceNotReady", "InvalidDependency", "InvalidDriftDetection", "InvalidHealthCheckExprs", "InvalidPostRenderers",
	runner.HookResourcesDeletedReason, runner.HookResourcesLeftReason, runner.HookCleanupFailedReason,
	runner.ResourceRecreatedReason, runner.ResourceGroupWarningReason, runner.ResourceGroupStuckReason,
	PlannedReason, PlanFailedReason,
}

// TestEventTypes lists the events our code emits by type and checks them:
// progress events are Trace only, every other event is an outcome of
// Normal or Warning type, and an event upstream v1.6.4 emits under the
// same reason has upstream's types. A new reason must be classified here.
func TestEventTypes(t *testing.T) {
	ours := typesByReason(scanEmissions(t, true, ".", filepath.Join("..", "reconcile"), filepath.Join("..", "runner")))
	upstreamDir := upstreamSource(t)
	upstream := typesByReason(scanEmissions(t, false,
		filepath.Join(upstreamDir, "internal", "controller"), filepath.Join(upstreamDir, "internal", "reconcile")))
	if len(upstream) < 10 {
		t.Fatalf("the scan of upstream's source found only %v: the scanner no longer reads it", upstream)
	}
	logByType(t, "ours", ours)
	logByType(t, "upstream v1.6.4", upstream)

	for _, reason := range progressReasons {
		t.Run("progress "+reason, func(t *testing.T) {
			types, emitted := ours[reason]
			switch {
			case !emitted:
				t.Errorf("progress event %s is not emitted any more: update progressReasons", reason)
			case slices.Equal(types, []string{typeTrace}):
			default:
				t.Errorf("progress event %s is emitted as %v, want Trace only (alerts must carry outcomes only)", reason, types)
			}
		})
	}
	for reason, types := range ours {
		if slices.Contains(progressReasons, reason) {
			continue
		}
		if slices.Contains(types, typeTrace) {
			t.Errorf("event %s is emitted as Trace, but it is no progress event: an outcome must reach alerts", reason)
		}
		upTypes, upstreamHasIt := upstream[reason]
		switch {
		case upstreamHasIt && !slices.Equal(types, upTypes):
			t.Errorf("event %s is emitted as %v, upstream emits it as %v", reason, types, upTypes)
		case !upstreamHasIt && !slices.Contains(ourOutcomeReasons, reason):
			t.Errorf("event %s (%v) is neither upstream's nor classified: add it to progressReasons or ourOutcomeReasons", reason, types)
		}
	}
}

func typesByReason(emissions []emission) map[string][]string {
	types := map[string][]string{}
	for _, e := range emissions {
		if !slices.Contains(types[e.reason], e.eventType) {
			types[e.reason] = append(types[e.reason], e.eventType)
			slices.Sort(types[e.reason])
		}
	}
	return types
}

func logByType(t *testing.T, who string, types map[string][]string) {
	t.Helper()
	byType := map[string][]string{}
	for reason, ts := range types {
		for _, typ := range ts {
			byType[typ] = append(byType[typ], reason)
		}
	}
	for _, typ := range []string{typeTrace, typeNormal, typeWarning} {
		slices.Sort(byType[typ])
		t.Logf("%s %s: %s", who, typ, strings.Join(byType[typ], ", "))
	}
}

// upstreamSource is the source of upstream helm-controller v1.6.4, the
// module hack/tools builds its binary from (in the module cache after
// `make tools`).
func upstreamSource(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/fluxcd/helm-controller")
	cmd.Dir = filepath.Join("..", "..", "hack", "tools", "helm-controller")
	out, err := cmd.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("upstream helm-controller's source is not in the module cache: run `make tools` (%v)", err)
	}
	return dir
}
