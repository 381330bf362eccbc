package e2e

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestUpstreamParity runs scenarios of upstream's own end-to-end suite
// (its config/testdata, served locally) against the real upstream
// helm-controller and against ours, side by side, and compares what Flux
// users' alerts, dashboards and `flux get` read once each step settles:
// the Ready, Released, Remediated, TestSuccess and Stalled conditions
// (status and reason), the failure counters, the last attempted action,
// status.history and Helm storage.
func TestUpstreamParity(t *testing.T) {
	t.Parallel()
	crashloop := map[string]any{"podAnnotations": map[string]any{"sim.afterhooks.io/fail": "crashloop"}}
	short := &metav1.Duration{Duration: 3 * time.Second}
	scenarios := []parityScenario{
		{
			// The install fails; its last failure is remediated by an
			// uninstall that keeps the history.
			name: "install-fail-remediate",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				hr := parityPodinfo(t, ns, repo, crashloop)
				hr.Spec.Timeout = short
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{
					Remediation: &helmv2.InstallRemediation{RemediateLastFailure: ptr.To(true)}}}
				hr.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{KeepHistory: true}}
				return hr
			},
			steps: []parityStep{{name: "stalled", settled: parityStalled, want: []string{
				"Ready: False/InstallFailed", "Remediated: True/UninstallSucceeded", "history [v1 uninstalled]"}}},
		},
		{
			// The install fails, is uninstalled, fails again and stays.
			name: "install-fail-retry",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				hr := parityPodinfo(t, ns, repo, crashloop)
				hr.Spec.Timeout = short
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{
					Remediation: &helmv2.InstallRemediation{Retries: 1}}}
				return hr
			},
			steps: []parityStep{{name: "stalled", settled: parityStalled, want: []string{
				"Remediated: -", "history [v1 failed]", "storage [v1 failed]"}}},
		},
		{
			// A healthy release is upgraded to pods that never become
			// ready; the failed upgrade is remediated by an uninstall.
			name: "upgrade-fail-remediate-uninstall",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				return parityPodinfo(t, ns, repo, nil)
			},
			steps: []parityStep{
				{name: "installed", settled: parityReady},
				{name: "stalled", settled: parityStalled, want: []string{"Failed to install after 1 attempt(s)",
					"install 1 upgrade 1", "history [v1 failed]"}, change: func(hr *v2.HelmRelease) {
					hr.Spec.Values = framework.JSONFrom(crashloop)
					hr.Spec.Timeout = short
					hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Remediation: &helmv2.UpgradeRemediation{
						RemediateLastFailure: ptr.To(true), Strategy: ptr.To(helmv2.UninstallRemediationStrategy)}}}
				}},
			},
		},
		{
			// The impersonated account may not create an
			// HorizontalPodAutoscaler, so Helm refuses the install up front;
			// granting it lets the release recover by itself.
			name: "impersonation-podinfo-fail",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				env.ServiceAccount(t, ns, "gotk-reconciler",
					rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"*"}},
					rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"*"}, Verbs: []string{"*"}})
				hr := parityPodinfo(t, ns, repo, map[string]any{"hpa": map[string]any{"enabled": true, "maxReplicas": 2, "cpu": 10}})
				hr.Spec.ServiceAccountName = "gotk-reconciler"
				return hr
			},
			steps: []parityStep{
				{name: "refused", settled: parityNotReady, backoff: true, want: []string{"Stalled: -", "history []"}},
				{name: "recovered", settled: parityReady, backoff: true, act: func(t *testing.T, hr *v2.HelmRelease) {
					env.ServiceAccount(t, hr.Namespace, "autoscaling",
						rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"*"}, Verbs: []string{"*"}})
					rb := &rbacv1.RoleBinding{}
					if err := env.Get(context.Background(), rb, hr.Namespace, "autoscaling"); err != nil {
						t.Fatal(err)
					}
					rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: hr.Namespace, Name: "gotk-reconciler"})
					if err := env.Client.Update(context.Background(), rb); err != nil {
						t.Fatal(err)
					}
				}},
			},
		},
		{
			// A drift ignore path that is not a JSON pointer: upstream
			// installs the release and reports Ready; this controller
			// stalled it before installing anything.
			name: "drift-ignore-path-not-pointer",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				hr := parityPodinfo(t, ns, repo, nil)
				hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled,
					Ignore: []helmv2.IgnoreRule{{Paths: []string{"spec.replicas"}}}}
				return hr
			},
			steps: []parityStep{{name: "ready", settled: parityReady, want: []string{
				"Ready: True/InstallSucceeded", "Stalled: -", "history [v1 deployed]"}}},
		},
		{
			// A failing Helm test whose failures are ignored.
			name: "install-test-fail-ignore",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				chart := env.PublishChart(t, "e2e-tests", "0.1.0", ns, chartserver.WithValues(map[string]any{"testFail": true}))
				hr := framework.Release(ns, "tested", repo, chart.Name, chart.Version, "")
				hr.Spec.Test = &helmv2.Test{Enable: true, IgnoreFailures: true}
				return hr
			},
			steps: []parityStep{{name: "ready", settled: parityReady, want: []string{"Ready: True/InstallSucceeded"}}},
		},
		{
			// The first install times out and stays failed (no retries);
			// a values change then retries it. Upstream upgrades over the
			// failed install: upgrade hooks, UpgradeFailed, then
			// UpgradeSucceeded once the values are fixed.
			name: "install-fail-then-values-change",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				hr := parityPodinfo(t, ns, repo, crashloop)
				hr.Spec.Timeout = short
				return hr
			},
			steps: []parityStep{
				{name: "install failed", settled: parityStalled, want: []string{"Ready: False/InstallFailed", "history [v1 failed]"}},
				{name: "upgrade over it failed", settled: parityReason(helmv2.UpgradeFailedReason), want: []string{
					"Ready: False/UpgradeFailed", `last action "upgrade"`}, change: func(hr *v2.HelmRelease) {
					hr.Spec.Values = framework.JSONFrom(map[string]any{"replicaCount": 2, "podAnnotations": crashloop["podAnnotations"]})
				}},
				{name: "upgrade over it succeeded", settled: parityReady, want: []string{"Ready: True/UpgradeSucceeded"},
					change: func(hr *v2.HelmRelease) { hr.Spec.Values, hr.Spec.Timeout = nil, nil }},
			},
		},
		{
			// RetryOnFailure on the install only: the failed install is
			// retried with an upgrade over it, as any failed release,
			// whose own strategy (RemediateOnFailure, no retries) then
			// counts: upstream stalls after that upgrade failed.
			name: "install-retry-on-failure",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				hr := parityPodinfo(t, ns, repo, crashloop)
				hr.Spec.Timeout = short
				hr.Spec.Install = &v2.Install{Install: helmv2.Install{Strategy: &helmv2.InstallStrategy{
					Name: string(helmv2.ActionStrategyRetryOnFailure), RetryInterval: short}}}
				return hr
			},
			steps: []parityStep{{name: "stalled", settled: parityStalled, want: []string{
				"Ready: False/UpgradeFailed", `last action "upgrade"`}}},
		},
		{
			// Drift detection enabled; the Deployment is scaled by hand
			// and an admission policy refuses the correction. Both the
			// conditions and the events' types and reasons are compared.
			name: "drift-correction-fails",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				hr := parityPodinfo(t, ns, repo, map[string]any{"replicaCount": 1})
				hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
				return hr
			},
			steps: []parityStep{
				{name: "installed", settled: parityReady},
				{name: "correction refused", settled: parityEvent("DriftCorrectionFailed"), events: true,
					act: func(t *testing.T, hr *v2.HelmRelease) {
						refuseReplicas(t, hr.Namespace, hr.Name, 1)
						driftScale(t, hr.Namespace, hr.Name, 3)
						env.RequestReconcile(t, hr)
					}},
			},
		},
		{
			// A release in sync is suspended (flux suspend): the
			// suspended generation counts as handled, so that a
			// Kustomization's health check and a dependsOn on it pass.
			name: "suspend",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				return parityPodinfo(t, ns, repo, nil)
			},
			steps: []parityStep{
				{name: "installed", settled: parityReady},
				{name: "suspended", settled: parityAnyState, want: []string{"Ready: True/InstallSucceeded", "observedGeneration current"},
					change: func(hr *v2.HelmRelease) { hr.Spec.Suspend = true }},
			},
		},
		{
			// A Helm test fails; the tests are then turned off, which
			// changes neither chart nor values.
			name: "test-fail-then-disabled",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				chart := env.PublishChart(t, "e2e-tests", "0.1.0", ns, chartserver.WithValues(map[string]any{"testFail": true}))
				hr := framework.Release(ns, "tested", repo, chart.Name, chart.Version, "")
				hr.Spec.Test = &helmv2.Test{Enable: true}
				return hr
			},
			steps: []parityStep{
				{name: "test failed", settled: parityNotReady, backoff: true},
				{name: "tests off", settled: parityAnyState, backoff: true, change: func(hr *v2.HelmRelease) { hr.Spec.Test = nil }},
			},
		},
		{
			// Helm's force on an upgrade the API server refuses: a custom
			// resource whose CRD makes spec.size immutable, with a
			// PersistentVolumeClaim its operator made under it. Upstream
			// fails the upgrade and keeps both; so must we.
			name: "upgrade-force-immutable-custom-resource",
			release: func(t *testing.T, ns, repo string) *v2.HelmRelease {
				env.DatabaseCRD(t)
				chart := env.PublishChart(t, crChart, "0.1.0", ns)
				hr := framework.Release(ns, "cr", repo, chart.Name, chart.Version, `{"size":"1Gi"}`)
				hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Force: true}}
				return hr
			},
			steps: []parityStep{
				{name: "installed", settled: parityReady},
				{name: "refused", settled: parityNotReady, backoff: true, want: []string{"Ready: False/UpgradeFailed"},
					act: func(t *testing.T, hr *v2.HelmRelease) {
						env.OwnedClaim(t, env.Database(t, hr.Namespace, "cr-db"), "cr-data")
					},
					change: func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"size":"2Gi"}`) },
					verify: func(t *testing.T, hr *v2.HelmRelease) {
						db := env.Database(t, hr.Namespace, "cr-db")
						pvc := named(&corev1.PersistentVolumeClaim{}, hr.Namespace, "cr-data")
						uidOf(t, pvc)
						if db.GetDeletionTimestamp() != nil || pvc.DeletionTimestamp != nil || !ownedBy(pvc, db.GetUID()) {
							t.Errorf("%s: the Database or its claim was deleted or replaced", hr.Namespace)
						}
					}},
			},
		},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sides := []*paritySide{
				{name: "upstream", binary: framework.UpstreamBinary(t)},
				{name: "ours"},
			}
			for _, side := range sides {
				side.ns = env.Namespace(t)
				repo := env.HelmRepository(t, side.ns)
				side.ctl = env.StartShard(t, side.ns, framework.ControllerOptions{Shard: "parity-" + rand.String(8), Binary: side.binary})
				framework.EnsureRunning(t, side.ctl)
				side.hr = framework.Sharded(sc.release(t, side.ns, repo.Name), side.ctl)
				env.Create(t, side.hr)
			}
			for _, step := range sc.steps {
				for _, side := range sides {
					if step.act != nil {
						step.act(t, side.hr)
					}
					if step.change != nil {
						env.PatchSpec(t, side.hr, step.change)
					}
				}
				got := map[string]paritySnapshot{}
				for _, side := range sides {
					snap := side.settle(t, step)
					if step.events {
						snap.events = side.eventReasons(t)
					}
					if step.backoff {
						snap = snap.failuresCounted()
					}
					got[side.name] = snap
					if step.verify != nil {
						step.verify(t, side.hr)
					}
				}
				if diff := got["upstream"].diff(got["ours"]); diff != "" {
					t.Errorf("after %q, ours differs from upstream (field: upstream | ours):\n%s", step.name, diff)
				} else {
					t.Logf("after %q both read:\n%s", step.name, got["ours"])
				}
				// What the issue reported of upstream, so that a change in
				// both controllers alike still shows.
				for _, want := range step.want {
					if !strings.Contains(got["ours"].String(), want) {
						t.Errorf("after %q ours does not read %q:\n%s", step.name, want, got["ours"])
					}
				}
			}
		})
	}
}

type parityScenario struct {
	name string
	// release builds the HelmRelease of the scenario in ns, from the
	// HelmRepository repo (and anything else it needs).
	release func(t *testing.T, ns, repo string) *v2.HelmRelease
	steps   []parityStep
}

type parityStep struct {
	name string
	// act changes the world, change the spec, before the step settles;
	// both optional.
	act    func(t *testing.T, hr *v2.HelmRelease)
	change func(hr *v2.HelmRelease)
	// settled is nil once the HelmRelease reached the step's end state.
	settled func(hr *v2.HelmRelease) error
	// backoff: the step's failures are retried with backoff, so how many
	// status.failures counts depends on how long the step took; compare
	// only that they are counted.
	backoff bool
	// want: lines the snapshot must hold, whatever upstream reads.
	want []string
	// verify, when set, checks the cluster of each side once the step
	// settled.
	verify func(t *testing.T, hr *v2.HelmRelease)
	// events: compare the types and reasons of the HelmRelease's events
	// too.
	events bool
	// timeout bounds the wait for settled; two minutes when zero.
	timeout time.Duration
}

// paritySide is one controller running the scenario in a namespace of
// its own.
type paritySide struct {
	name, binary, ns string
	ctl              *framework.Controller
	hr               *v2.HelmRelease
}

// settle waits for the step's end state, then for the snapshot to stay
// the same for a while, and returns it.
func (s *paritySide) settle(t *testing.T, step parityStep) paritySnapshot {
	t.Helper()
	timeout := step.timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	env.Eventually(t, timeout, fmt.Sprintf("%s: %s", s.name, step.name), func(ctx context.Context) error {
		framework.MustRun(t, s.ctl)
		if err := env.Get(ctx, s.hr, s.ns, s.hr.Name); err != nil {
			return err
		}
		return step.settled(s.hr)
	})
	snap := s.snapshot(t)
	env.Eventually(t, time.Minute, fmt.Sprintf("%s: %s stays put", s.name, step.name), func(ctx context.Context) error {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			time.Sleep(framework.PollInterval)
			next := s.snapshot(t)
			if d := snap.diff(next); d != "" {
				snap = next
				return fmt.Errorf("still changing:\n%s", d)
			}
		}
		return nil
	})
	return snap
}

// paritySnapshot is what the comparison looks at.
type paritySnapshot struct {
	conditions                                map[string]string
	stalledMessage                            string
	installFailures, upgradeFailures, failure int64
	lastAction                                string
	// observed is "current" when status.observedGeneration is the
	// object's generation, else "behind".
	observed         string
	history, storage []string
	// events are the HelmRelease's events as "Type/Reason", each once,
	// sorted; only for a step that compares them.
	events []string
}

var parityConditions = []string{meta.ReadyCondition, helmv2.ReleasedCondition, helmv2.RemediatedCondition,
	helmv2.TestSuccessCondition, meta.StalledCondition, helmv2.DriftedCondition}

func (s *paritySide) snapshot(t *testing.T) paritySnapshot {
	t.Helper()
	if err := env.Get(context.Background(), s.hr, s.ns, s.hr.Name); err != nil {
		t.Fatal(err)
	}
	st := s.hr.Status
	snap := paritySnapshot{conditions: map[string]string{}, installFailures: st.InstallFailures,
		upgradeFailures: st.UpgradeFailures, failure: st.Failures, lastAction: string(st.LastAttemptedReleaseAction),
		observed: "behind"}
	if st.ObservedGeneration == s.hr.Generation {
		snap.observed = "current"
	}
	for _, typ := range parityConditions {
		if c := conditions.Get(s.hr, typ); c != nil {
			snap.conditions[typ] = fmt.Sprintf("%s/%s", c.Status, c.Reason)
		} else {
			snap.conditions[typ] = "-"
		}
	}
	snap.stalledMessage = conditions.GetMessage(s.hr, meta.StalledCondition)
	for _, h := range st.History {
		snap.history = append(snap.history, fmt.Sprintf("v%d %s", h.Version, h.Status))
	}
	for _, r := range env.Storage(t, s.ns, s.hr.Name) {
		snap.storage = append(snap.storage, fmt.Sprintf("v%d %s", r.Release.Version, r.Release.Info.Status))
	}
	return snap
}

// failuresCounted is s with status.failures reduced to whether any was
// counted (0 or 1).
func (s paritySnapshot) failuresCounted() paritySnapshot {
	s.failure = min(s.failure, 1)
	return s
}

// diff lists the fields where o differs from s, one per line.
func (s paritySnapshot) diff(o paritySnapshot) string {
	var b strings.Builder
	line := func(field string, a, c any) {
		if !reflect.DeepEqual(a, c) {
			fmt.Fprintf(&b, "  %s: %v | %v\n", field, a, c)
		}
	}
	for _, typ := range parityConditions {
		line(typ, s.conditions[typ], o.conditions[typ])
	}
	line("Stalled message", s.stalledMessage, o.stalledMessage)
	line("installFailures", s.installFailures, o.installFailures)
	line("upgradeFailures", s.upgradeFailures, o.upgradeFailures)
	line("failures", s.failure, o.failure)
	line("lastAttemptedReleaseAction", s.lastAction, o.lastAction)
	line("observedGeneration", s.observed, o.observed)
	line("history", s.history, o.history)
	line("storage", s.storage, o.storage)
	line("events", s.events, o.events)
	return b.String()
}

func (s paritySnapshot) String() string {
	var b strings.Builder
	for _, typ := range parityConditions {
		fmt.Fprintf(&b, "  %s: %s\n", typ, s.conditions[typ])
	}
	if s.stalledMessage != "" {
		fmt.Fprintf(&b, "  Stalled message: %s\n", s.stalledMessage)
	}
	fmt.Fprintf(&b, "  failures: install %d upgrade %d total %d; last action %q; observedGeneration %s\n  history %v\n  storage %v",
		s.installFailures, s.upgradeFailures, s.failure, s.lastAction, s.observed, s.history, s.storage)
	if s.events != nil {
		fmt.Fprintf(&b, "\n  events %v", s.events)
	}
	return b.String()
}

func parityPodinfo(t *testing.T, ns, repo string, values map[string]any) *v2.HelmRelease {
	t.Helper()
	hr := env.PodinfoRelease(ns, "podinfo", repo, "")
	if values != nil {
		hr.Spec.Values = framework.JSONFrom(values)
	}
	return hr
}

func parityStalled(hr *v2.HelmRelease) error {
	if !conditions.IsStalled(hr) {
		return fmt.Errorf("not stalled: %s", framework.Conditions(hr))
	}
	return nil
}

// parityAnyState settles a step on whatever state stays put: for a change
// that either controller may leave unobserved.
func parityAnyState(*v2.HelmRelease) error { return nil }

func parityReady(hr *v2.HelmRelease) error {
	if hr.Status.ObservedGeneration != hr.Generation || !conditions.IsReady(hr) {
		return fmt.Errorf("not ready at generation %d: %s", hr.Generation, framework.Conditions(hr))
	}
	return nil
}

// parityNotReady: a reconcile of the current spec failed.
func parityNotReady(hr *v2.HelmRelease) error {
	c := conditions.Get(hr, meta.ReadyCondition)
	if hr.Status.LastAttemptedGeneration != hr.Generation || c == nil || c.Status != metav1.ConditionFalse {
		return fmt.Errorf("not failed yet: %s", framework.Conditions(hr))
	}
	return nil
}

// ownedBy tells whether obj names uid among its owners.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// eventReasons lists the types and reasons of the HelmRelease's events,
// each once, sorted.
func (s *paritySide) eventReasons(t *testing.T) []string {
	t.Helper()
	events, err := env.Events(context.Background(), s.ns, s.hr.Name)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	out := []string{}
	for _, ev := range events {
		if r := ev.Type + "/" + ev.Reason; !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// parityReason: a reconcile of the current spec ended with Ready False
// for reason.
func parityReason(reason string) func(hr *v2.HelmRelease) error {
	return func(hr *v2.HelmRelease) error {
		c := conditions.Get(hr, meta.ReadyCondition)
		if hr.Status.LastAttemptedGeneration != hr.Generation || c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			return fmt.Errorf("not %s yet: %s", reason, framework.Conditions(hr))
		}
		return nil
	}
}

// parityEvent: the HelmRelease has an event of reason.
func parityEvent(reason string) func(hr *v2.HelmRelease) error {
	return func(hr *v2.HelmRelease) error {
		_, err := env.FindEvent(context.Background(), hr.Namespace, hr.Name, framework.EventWant{Reason: reason})
		return err
	}
}

// refuseReplicas installs an admission policy that refuses any update
// setting the Deployment ns/name's spec.replicas to replicas (a drift
// correction back to it), and waits until the API server applies it.
// Dry runs pass: drift detection compares through them.
func refuseReplicas(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-replicas-" + ns},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				ResourceNames: []string{name},
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("request.dryRun || !has(object.spec.replicas) || object.spec.replicas != %d", replicas),
				Message:    fmt.Sprintf("spec.replicas may not be set to %d (the test's admission policy)", replicas),
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}},
		},
	}
	env.Create(t, policy)
	env.Create(t, binding)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), binding)
		_ = env.Client.Delete(context.Background(), policy)
	})
	env.Eventually(t, 30*time.Second, "the admission policy refuses the update", func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Get(ctx, d, ns, name); err != nil {
			return err
		}
		// The replicas are still the ones the policy refuses: an update
		// that passes (the policy is not in force yet) changes nothing the
		// release manages.
		d.Spec.Replicas = ptr.To(replicas)
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["parity.afterhooks.io/probe"] = time.Now().Format(time.RFC3339Nano)
		err := env.Client.Update(ctx, d)
		if err == nil || !strings.Contains(err.Error(), "may not be set") {
			return fmt.Errorf("an update was not refused: %v", err)
		}
		return nil
	})
}
