package action

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The action executes the plan and decides nothing (see doc.go): what the
// UseHelm3Defaults gate changes and what Helm's "auto" server-side apply
// resolves to from the stored revision are decided by internal/plan and
// internal/runner. This reads the package's own source (not its tests)
// and fails when
//
//   - any of it reads the gate (a selector .UseHelm3Defaults: Config
//     carries it to the runner, which decides with it), or
//   - the code an install, upgrade, rollback or dry run runs reads Helm
//     storage itself: a read of <cfg>.Releases (Last, Deployed, History,
//     Get, ...) or of a storage driver's newest revision, reached from
//     Install, Upgrade, Rollback or DryRun through the package's
//     functions. Helm's own actions read storage, which is theirs to do;
//     RollbackTarget, LastRelease and History remain for the runner.
func TestTheActionDecidesNothing(t *testing.T) {
	files := packageFiles(t)
	for _, f := range files {
		ast.Inspect(f.file, func(n ast.Node) bool {
			// features.UseHelm3Defaults is the gate's name, which ConfigOf
			// looks up for the runner.
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "UseHelm3Defaults" && !isIdent(sel.X, "features") {
				t.Errorf("%s reads the UseHelm3Defaults gate: the plan decides what it changes", f.fset.Position(sel.Pos()))
			}
			return true
		})
	}

	// The package's functions and methods by name.
	funcs := map[string]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				funcs[fd.Name.Name] = fd
			}
		}
	}
	fset := files[0].fset
	reached := map[string]bool{}
	// Each entry point on its own, so that each reports its own way to a
	// read; what each function refers to (called or passed on) is reached.
	for _, entry := range []string{"Install", "Upgrade", "Rollback", "DryRun"} {
		if funcs[entry] == nil {
			t.Fatalf("entry point %s not found", entry)
		}
		path := map[string][]string{entry: {entry}}
		for queue := []string{entry}; len(queue) > 0; queue = queue[1:] {
			name := queue[0]
			reached[name] = true
			ast.Inspect(funcs[name].Body, func(n ast.Node) bool {
				var ref string
				switch n := n.(type) {
				case *ast.Ident:
					ref = n.Name
				case *ast.SelectorExpr:
					ref = n.Sel.Name
				}
				if funcs[ref] != nil && path[ref] == nil {
					path[ref] = append(slices.Clone(path[name]), ref)
					queue = append(queue, ref)
				}
				if read := storageRead(n); read != "" {
					t.Errorf("%s reads Helm storage (%s) on the way %s: the runner reads it and puts the decision in the plan",
						fset.Position(n.Pos()), read, strings.Join(path[name], " -> "))
				}
				return true
			})
		}
	}
	// Guard the guard: the walk must reach the code that maps the spec,
	// or it proves nothing.
	for _, f := range []string{"newInstall", "newUpgrade", "newRollback", "upgradeCRDStep", "stacked", "dryRunUpgradeOffline"} {
		if !reached[f] {
			t.Errorf("%s is not reached from the entry points", f)
		}
	}
}

// storageRead names the Helm storage read n makes, or is empty.
func storageRead(n ast.Node) string {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	switch sel.Sel.Name {
	case "Newest":
		// The newest revision of a storage driver (newestReader).
		return ".Newest"
	case "Last", "Deployed", "DeployedAll", "History", "Get", "ListReleases", "ListDeployed", "ListUninstalled":
		if x, ok := sel.X.(*ast.SelectorExpr); ok && x.Sel.Name == "Releases" {
			return ".Releases." + sel.Sel.Name
		}
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

type parsedFile struct {
	fset *token.FileSet
	file *ast.File
}

// packageFiles parses the package's Go files, tests left out.
func packageFiles(t *testing.T) []parsedFile {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []parsedFile
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, parsedFile{fset: fset, file: f})
	}
	if len(files) == 0 {
		t.Fatal("no source files found")
	}
	return files
}
