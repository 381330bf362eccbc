// Package codeshape measures the shape of the project's production code,
// so that a test keeps it within the limits the developers' guide sets:
// short functions.
package codeshape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Func is one function or method and its length in lines, from its
// signature to its closing brace.
type Func struct {
	Position string
	Name     string
	Lines    int
}

func (f Func) String() string { return fmt.Sprintf("%s: %s is %d lines", f.Position, f.Name, f.Lines) }

// LongFuncs returns the functions longer than limit in the production Go
// files under root: every .go file but tests and generated files
// (zz_generated*), outside the directories skip names (relative to root).
func LongFuncs(root string, limit int, skip []string) ([]Func, error) {
	var long []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if skipped(filepath.ToSlash(rel), skip) || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !production(d.Name()) {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", rel, err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			if lines := end.Line - start.Line + 1; lines > limit {
				long = append(long, Func{Position: fmt.Sprintf("%s:%d", filepath.ToSlash(rel), start.Line), Name: funcName(fn), Lines: lines})
			}
		}
		return nil
	})
	return long, err
}

func production(name string) bool {
	return strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, "zz_generated")
}

func skipped(rel string, skip []string) bool {
	for _, s := range skip {
		if rel == s || strings.HasPrefix(rel, s+"/") {
			return true
		}
	}
	return false
}

// funcName is Name or (Receiver).Name.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
