package reconcile

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
)

// TestTestSuccessMessage checks the TestSucceeded message, worded as
// upstream words it (flux get hr and alerts show it).
func TestTestSuccessMessage(t *testing.T) {
	hooks := func(n int) map[string]*helmv2.TestHookStatus {
		m := map[string]*helmv2.TestHookStatus{}
		for i := range n {
			m[string(rune('a'+i))] = &helmv2.TestHookStatus{Phase: "Succeeded"}
		}
		return m
	}
	cases := []struct {
		hooks int
		want  string
	}{
		{0, "Helm test succeeded for release apps/web.v2 with chart podinfo@6.7.1: no test hooks"},
		{1, "Helm test succeeded for release apps/web.v2 with chart podinfo@6.7.1: 1 test hook completed successfully"},
		{3, "Helm test succeeded for release apps/web.v2 with chart podinfo@6.7.1: 3 test hooks completed successfully"},
	}
	for _, tc := range cases {
		s := &helmv2.Snapshot{Name: "web", Namespace: "apps", Version: 2, ChartName: "podinfo", ChartVersion: "6.7.1"}
		if tc.hooks > 0 {
			s.SetTestHooks(hooks(tc.hooks))
		}
		if got := testSuccessMessage(s); got != tc.want {
			t.Errorf("%d hooks: %q, want %q", tc.hooks, got, tc.want)
		}
	}
}
