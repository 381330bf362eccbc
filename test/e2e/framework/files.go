package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// WriteFile writes content to path, creating its directory.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// LogContains returns nil when one line of the log file at path contains
// all of parts.
func LogContains(path string, parts ...string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return nil
		}
	}
	return fmt.Errorf("no log line in %s contains all of %q", path, parts)
}
