package codeshape

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a production function may be.
const maxFuncLines = 80

// TestNoLongProductionFunctions: main.go, api/ and internal/ hold no
// function over maxFuncLines lines. The test harness (test/) and the
// developer tools (hack/) are not production code.
func TestNoLongProductionFunctions(t *testing.T) {
	long, err := LongFuncs(filepath.Join("..", ".."), maxFuncLines, []string{"test", "hack", "config", "docs", "charts"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s (at most %d): split it", f, maxFuncLines)
	}
}

func TestLongFuncsFindsALongFunction(t *testing.T) {
	dir := t.TempDir()
	body := strings.Repeat("\t_ = 1\n", 5)
	src := "package p\n\nfunc short() {\n" + body + "}\n\ntype T struct{}\n\nfunc (*T) long() {\n" + strings.Repeat(body, 3) + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// A test file with a long function is not production code.
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc longTest() {\n"+strings.Repeat(body, 4)+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	long, err := LongFuncs(dir, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) != 1 || long[0].Name != "T.long" || long[0].Lines != 17 || long[0].Position != "p.go:13" {
		t.Errorf("got %v, want only T.long (p.go:13, 17 lines)", long)
	}
}
