package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// waitCauseChart is the chart whose values keep its Deployment (or its
// Job) from becoming ready in one way or another.
const waitCauseChart = "wait-cause"

// TestWaitCause (issue 49): a failed readiness wait says why it is stuck,
// after upstream's words and on the same line, in the Ready condition and
// in the failure event: the deadlock of a pod waiting for a Secret that
// only a post hook may create, an image that cannot be pulled, a crash
// loop, a pod no node takes, a Job whose pod failed, the deadlock under
// spec.waitStrategy.name ordered, and under afterHooks a missing Secret.
func TestWaitCause(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		chart  string
		values string
		// afterHooks runs the install with waitStrategy afterHooks.
		afterHooks bool
		// ordered applies and waits with spec.waitStrategy.name ordered.
		ordered bool
		// words are what the message starts with after Helm's
		// "Helm install failed for release …: ".
		words string
		// cause matches the cause the message gives after them.
		cause string
		// absent must not be in the message.
		absent string
	}{{
		name:  "beforeHooks-deadlock",
		chart: framework.DeadlockChart,
		words: "timeout waiting for: [Deployment/{ns}/app status: 'InProgress'] (",
		cause: `pod app-[a-z0-9]+-[a-z0-9]+ waits for Secret app-creds, which no object of this release creates; ` +
			`1 post-install hook runs after this wait; if one of them creates app-creds, set waitStrategy: afterHooks\)$`,
	}, {
		name:    "ordered-deadlock",
		chart:   framework.DeadlockChart,
		ordered: true,
		words:   "timeout waiting for: [Deployment/{ns}/app status: 'InProgress'] (",
		cause: `pod app-[a-z0-9]+-[a-z0-9]+ waits for Secret app-creds, which no object of this release creates; ` +
			`1 post-install hook runs after this wait; if one of them creates app-creds, set waitStrategy: afterHooks\)$`,
	}, {
		name:   "image-pull",
		chart:  waitCauseChart,
		values: `{"podAnnotations":{"sim.afterhooks.io/fail":"image-pull"}}`,
		words:  "timeout waiting for: [Deployment/{ns}/app status: 'InProgress'] (",
		cause: `pod app-[a-z0-9]+-[a-z0-9]+: cannot pull image "example.com/web:1" of container web ` +
			`\(ImagePullBackOff: Back-off pulling image "example.com/web:1"\)\)$`,
	}, {
		name:   "crash-loop",
		chart:  waitCauseChart,
		values: `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`,
		words:  "timeout waiting for: [Deployment/{ns}/app status: 'InProgress'] (",
		cause:  `pod app-[a-z0-9]+-[a-z0-9]+: container web is crash-looping: it last ended with Error, exit code 1\)$`,
	}, {
		name:   "unschedulable",
		chart:  waitCauseChart,
		values: `{"nodeSelector":{"e2e.afterhooks.io/no-such-node":"true"}}`,
		words:  "timeout waiting for: [Deployment/{ns}/app status: 'InProgress'] (",
		cause:  `pod app-[a-z0-9]+-[a-z0-9]+: cannot be scheduled: 0/\d+ nodes are available: [^;]*node affinity/selector[^;]*\)$`,
	}, {
		name:   "failed-job",
		chart:  waitCauseChart,
		values: `{"job":true}`,
		words:  "failed early due to stalled resources: [Job/{ns}/app-migrate status: 'Failed'] (",
		cause:  `pod app-migrate-[a-z0-9]+: failed: container migrate ended with Error, exit code 1\)$`,
	}, {
		name:       "afterHooks-missing-secret",
		chart:      waitCauseChart,
		values:     `{"secret":"app-missing","hook":true}`,
		afterHooks: true,
		words:      "timeout waiting for: [Deployment/{ns}/app status: 'InProgress'] (readiness wait after the post-install hooks; ",
		cause:      `pod app-[a-z0-9]+-[a-z0-9]+: waits for Secret app-missing, which does not exist\)$`,
		absent:     "waitStrategy",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			repo := env.HelmRepository(t, ns)
			ref := env.PublishChart(t, tc.chart, "0.1.0", ns)
			hr := framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, tc.values)
			hr.Spec.Install = &v2.Install{Install: helmv2.Install{
				Timeout:     &metav1.Duration{Duration: 15 * time.Second},
				Remediation: &helmv2.InstallRemediation{Retries: 0},
			}}
			if tc.afterHooks {
				hr.Spec.Install.WaitStrategy = v2.AfterHooks
			}
			if tc.ordered {
				hr.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
			}
			env.Create(t, hr)

			env.Eventually(t, 2*time.Minute, "the install fails on its wait", func(ctx context.Context) error {
				if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
			})
			msg := conditions.Get(hr, meta.ReadyCondition).Message
			t.Logf("Ready message: %s", msg)

			words := strings.ReplaceAll(tc.words, "{ns}", ns)
			prefix := "Helm install failed for release "
			// One line: upstream's words right after Helm's, then the
			// objects' messages, then the cause, last.
			cause := regexp.MustCompile(`; ` + tc.cause)
			at := strings.Index(msg, ": "+words)
			switch {
			case strings.Contains(msg, "\n"):
				t.Errorf("Ready message spans lines: %q", msg)
			case !strings.HasPrefix(msg, prefix) || !strings.Contains(msg[:max(at, 0)], " with chart "+tc.chart+"@") || at < 0:
				t.Errorf("Ready message %q, want %q… with chart %s, then %q", msg, prefix, tc.chart, words)
			case !cause.MatchString(msg[at:]):
				t.Errorf("Ready message %q, want it to end with the cause %s", msg, tc.cause)
			case tc.absent != "" && strings.Contains(msg, tc.absent):
				t.Errorf("Ready message %q says %q", msg, tc.absent)
			}
			if released := conditions.Get(hr, helmv2.ReleasedCondition); released == nil || released.Message != msg {
				t.Errorf("Released condition %+v, want the Ready message", released)
			}
			event := env.WaitEvent(t, ns, hr.Name, framework.EventWant{
				Type: corev1.EventTypeWarning, Reason: helmv2.InstallFailedReason, Contains: words,
			})
			if !strings.Contains(event.Message, msg) {
				t.Errorf("failure event %q, want the Ready message %q", event.Message, msg)
			}
		})
	}
}
