// Package testcharts finds the Helm charts tests install. The charts every
// default test needs live in this repository (test/e2e/framework/charts:
// charts written for the tests, and a copy of podinfo), so a clone passes
// its tests on its own. A test that exercises a real chart the repository
// does not ship finds it through one setting, ExternalEnv, and is skipped,
// naming the chart, when the chart is not there.
package testcharts

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// ExternalEnv names the directory that holds outside charts, one
// sub-directory per chart (for example $HELM_CONTROLLER_EXTERNAL_CHARTS/minio).
const ExternalEnv = "HELM_CONTROLLER_EXTERNAL_CHARTS"

// Dir is the directory of the charts this repository ships.
var Dir = filepath.Join(repoRoot(), "test", "e2e", "framework", "charts")

// Podinfo is the repository's copy of the podinfo chart.
var Podinfo = filepath.Join(Dir, "podinfo")

// repoRoot is found from this file's own path, so any test package finds
// the charts whatever its working directory.
func repoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("testcharts: cannot locate the package source")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ExternalDir returns the directory of the outside chart name, or an error
// that says which chart is missing and how to provide it.
func ExternalDir(name string) (string, error) {
	root := os.Getenv(ExternalEnv)
	if root == "" {
		return "", fmt.Errorf("outside chart %q not available: set %s to a directory holding %s/Chart.yaml", name, ExternalEnv, name)
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return "", fmt.Errorf("outside chart %q not available: %s=%s has no %s/Chart.yaml", name, ExternalEnv, root, name)
	}
	return dir, nil
}

// External returns the directory of the outside chart name, or skips t
// with a message naming the chart and the setting.
func External(t testing.TB, name string) string {
	t.Helper()
	dir, err := ExternalDir(name)
	if err != nil {
		t.Skip(err.Error())
	}
	return dir
}

// CRD is the manifest of a namespaced CRD <plural>.<group> of kind, one
// version v1 served and stored, whose schema takes any field, with labels.
func CRD(plural, kind, group string, labels map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: %s.%s\n", plural, group)
	if len(labels) > 0 {
		b.WriteString("  labels:\n")
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			fmt.Fprintf(&b, "    %s: %q\n", k, labels[k])
		}
	}
	fmt.Fprintf(&b, `spec:
  group: %s
  names:
    kind: %s
    plural: %s
    singular: %s
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, strings.ToLower(kind))
	return b.String()
}
