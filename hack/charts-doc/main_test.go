package main

import (
	"testing"

	"github.com/afterhooks/helm-controller/test/realcharts"
)

func TestCells(t *testing.T) {
	tests := []struct {
		name, got, want string
	}{
		{"no values", valuesCell(nil), "-"},
		{"values as sorted JSON", valuesCell(map[string]any{"b": 1, "a": map[string]any{"c": "x|y"}}), "`{\"a\":{\"c\":\"x\\|y\"},\"b\":1}`"},
		{"empty cell", orNone(""), "-"},
		{"pipes escaped", orNone("a|b"), `a\|b`},
		{"missing feature", missing(nil), "**none in the corpus**"},
		{"charts listed", missing([]string{"a", "b"}), "a, b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestItems(t *testing.T) {
	cov := realcharts.Coverage{Objects: 45, Hooks: 3, CRDsDir: 2, Conditional: true, TTLHookJobs: 1}
	got := items(cov)
	for item, want := range map[string]bool{"50+ objects": true, "subcharts with conditions": true,
		"hook Jobs with ttlSecondsAfterFinished": true, "library chart": false, "CRDs in crds/": true} {
		if got[item] != want {
			t.Errorf("%s: got %v, want %v", item, got[item], want)
		}
	}
	for _, item := range itemOrder {
		if _, ok := got[item]; !ok && item != itemDeadlock {
			t.Errorf("item %q of the summary is never computed", item)
		}
	}
}
