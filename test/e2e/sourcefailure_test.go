package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSourceFailureIsNamed: when the chart's source fails, Ready says why
// in the source's own words, not only that the source is not ready, and
// follows the source while it fails (upstream rechecks at
// --requeue-dependency, 2s for the e2e controller; the interval is an hour).
func TestSourceFailureIsNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(ns string, repo string) (version, repoName string)
		want []string
	}{
		{"missing-version", func(_, repo string) (string, string) { return "99.0.0", repo },
			[]string{"99.0.0"}},
		{"missing-repository", func(_, _ string) (string, string) { return env.podinfo.Version, "missing" },
			[]string{"missing", "not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := newNamespace(t)
			repo := createHelmRepository(t, ns)
			hr := podinfoRelease(ns, "podinfo", repo)
			hr.Spec.Chart.Spec.Version, hr.Spec.Chart.Spec.SourceRef.Name = tc.edit(ns, repo.Name)
			remCreate(t, hr)
			eventually(t, time.Minute, "Ready=False names the source's failure", func(ctx context.Context) error {
				if err := get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				ready := conditions.Get(hr, meta.ReadyCondition)
				if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "SourceNotReady" {
					return fmt.Errorf("Ready %+v, want False/SourceNotReady", ready)
				}
				for _, w := range tc.want {
					if !strings.Contains(ready.Message, w) {
						return fmt.Errorf("Ready message %q does not contain %q", ready.Message, w)
					}
				}
				return nil
			})
			if n := releaseRevisions(t, ns, "podinfo"); n != 0 {
				t.Errorf("%d Helm revisions for a release whose source failed", n)
			}
		})
	}
}
