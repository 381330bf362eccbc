package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// machinePaths are the beginnings of paths that only exist on some
// machine: a home or work directory, or the folder that development
// machines keep beside the checkout. Split so this file does not match.
var machinePaths = []string{"/" + "work/", "/" + "root/", "/" + "home/", "/" + "Users/", `"..", "` + `shared"`, "../" + "shared/charts/"}

// TestRepositoryNamesNoMachinePath: no file of the repository refers to a
// path of one machine or reads the folder development machines keep beside
// the checkout, so a clone on its own builds and tests alike everywhere.
// .ci/run may look for that folder: it only hands it to the tests through
// HELM_CONTROLLER_EXTERNAL_CHARTS, and does without it.
func TestRepositoryNamesNoMachinePath(t *testing.T) {
	skipDirs := map[string]bool{".git": true, "bin": true, "dist": true, ".cluster": true}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if path == filepath.Join(".ci", "run") || d.Name() == ".git" {
			return nil // a worktree's .git file points at its main checkout
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(data, 0) >= 0 {
			return nil // binary
		}
		checked++
		for i, line := range strings.Split(string(data), "\n") {
			for _, p := range machinePaths {
				if strings.Contains(line, p) {
					t.Errorf("%s:%d names a machine's path (%q): %s", path, i+1, p, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files; is the working directory the repository root?", checked)
	}
}
