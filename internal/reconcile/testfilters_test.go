package reconcile

import (
	"slices"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Only the test hooks spec.test.filters run are recorded, as upstream
// records them: an excluded hook, or one not among the included, keeps an
// earlier run's result that must not count for this run.
func TestTestHookStatusesFollowTheFilters(t *testing.T) {
	rel := &releasev1.Release{Hooks: []*releasev1.Hook{
		{Name: "smoke", Events: []releasev1.HookEvent{releasev1.HookTest}},
		{Name: "flaky", Events: []releasev1.HookEvent{releasev1.HookTest},
			LastRun: releasev1.HookExecution{Phase: releasev1.HookPhaseFailed}},
		{Name: "load", Events: []releasev1.HookEvent{releasev1.HookTest}},
		{Name: "migrate", Events: []releasev1.HookEvent{releasev1.HookPreInstall}},
	}}
	for _, tc := range []struct {
		name    string
		filters []helmv2.Filter
		want    []string
	}{
		{name: "no filters", want: []string{"flaky", "load", "smoke"}},
		{name: "one excluded", filters: []helmv2.Filter{{Name: "flaky", Exclude: true}}, want: []string{"load", "smoke"}},
		{name: "one included", filters: []helmv2.Filter{{Name: "smoke"}}, want: []string{"smoke"}},
		{name: "included and excluded", filters: []helmv2.Filter{{Name: "smoke"}, {Name: "load"}, {Name: "load", Exclude: true}},
			want: []string{"smoke"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for name := range testHookStatuses(rel, tc.filters) {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("recorded %v, want %v", got, tc.want)
			}
		})
	}
}
