package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestSourceFailureIsNamed: when the chart's source fails, Ready says why
// in the source's own words, not only that the source is not ready, and
// follows the source while it fails (upstream rechecks at
// --requeue-dependency, 2s for the e2e controller; the interval is ten
// minutes). Unlike upstream, the source's own failure is also a Warning
// event, sent once and not at every recheck. The generation is not observed while the
// source fails, as upstream.
func TestSourceFailureIsNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(ns string, repo string) (version, repoName string)
		want []string
	}{
		{"missing-version", func(_, repo string) (string, string) { return "99.0.0", repo },
			[]string{"99.0.0"}},
		{"missing-repository", func(_, _ string) (string, string) { return env.Podinfo.Version, "missing" },
			[]string{"missing", "not found"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			repo := env.HelmRepository(t, ns)
			hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
			hr.Spec.Chart.Spec.Version, hr.Spec.Chart.Spec.SourceRef.Name = tc.edit(ns, repo.Name)
			env.Create(t, hr)
			env.Eventually(t, time.Minute, "Ready=False names the source's failure", func(ctx context.Context) error {
				if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				if hr.Status.ObservedGeneration == hr.Generation {
					return fmt.Errorf("observedGeneration %d reached while the source fails", hr.Status.ObservedGeneration)
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
			// The source's failure is announced, once per message.
			env.WaitEvent(t, ns, hr.Name, framework.EventWant{
				Type: corev1.EventTypeWarning, Reason: "SourceNotReady",
				Contains: tc.want[0],
			})
			events, err := env.Events(context.Background(), ns, hr.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events {
				if e.Reason == "SourceNotReady" && e.Count > 1 {
					t.Errorf("SourceNotReady event repeated %d times: %s", e.Count, e.Message)
				}
			}
			if n := len(env.Storage(t, ns, "podinfo")); n != 0 {
				t.Errorf("%d Helm revisions for a release whose source failed", n)
			}
		})
	}
}
