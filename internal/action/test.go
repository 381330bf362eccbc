package action

import (
	"context"

	helmaction "helm.sh/helm/v4/pkg/action"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

// Test runs the test hooks of the release of obj, filtered by
// spec.test.filters, and returns the release with the hooks' results
// (Hook.LastRun); hooks filtered out keep their previous results. Helm
// always watches test hooks with its kstatus watcher. ctx is accepted for
// symmetry: Helm's test action cannot be cancelled.
func Test(_ context.Context, cfg *helmaction.Configuration, obj *v2.HelmRelease, c Call) (*releasev1.Release, error) {
	if obj == nil {
		return nil, errNilObject
	}
	test := newTest(cfg, obj, c.Plan)
	rel, shutdown, err := test.Run(c.Plan.Release)
	// Delete the hooks (per their delete policy) whatever the outcome. A
	// failed deletion says nothing about the tests: as upstream, it is
	// logged and the tests' own outcome stands.
	if shutdown != nil {
		if cleanupErr := shutdown(); cleanupErr != nil {
			cfg.Logger().Warn("could not delete test hooks by their delete policy", "release", c.Plan.Release, "error", cleanupErr.Error())
		}
	}
	return toV1(rel, err)
}

// newTest maps the HelmRelease to Helm's test action.
func newTest(cfg *helmaction.Configuration, obj *v2.HelmRelease, p plan.Plan) *helmaction.ReleaseTesting {
	spec := obj.GetTest()

	test := helmaction.NewReleaseTesting(cfg)
	test.Namespace = obj.GetReleaseNamespace()
	test.Timeout = p.Wait.Timeout
	test.WaitOptions = waitOptions(p)
	for _, f := range spec.GetFilters() {
		key := helmaction.IncludeNameFilter
		if f.Exclude {
			key = helmaction.ExcludeNameFilter
		}
		test.Filters[key] = append(test.Filters[key], f.Name)
	}
	return test
}
