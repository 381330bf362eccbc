package helmverb

import (
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// A verb's event action is upstream's action named "Helm" and the verb.
func TestVerbEventAction(t *testing.T) {
	for _, v := range []Verb{Install, Upgrade, Rollback, Uninstall, Test} {
		want := "Helm" + strings.ToUpper(string(v[:1])) + string(v[1:])
		if got := v.EventAction(); string(got) != want {
			t.Errorf("%s: %s, want %s", v, got, want)
		}
	}
	if got := Verb("resume").EventAction(); got != helmv2.ActionReconcile {
		t.Errorf("an unknown verb reports on %s, want the reconcile", got)
	}
}
