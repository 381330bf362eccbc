package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// hcChart ships the Gadget CRD and one Gadget named after the release. No
// controller reconciles Gadgets: kstatus alone would call them Current at
// once, so only spec.healthCheckExprs can keep a release waiting for them.
const hcChart = "e2e-healthcheck"

var hcGadgetGVK = schema.GroupVersionKind{Group: "e2e.afterhooks.io", Version: "v1", Kind: "Gadget"}

// hcExprs judges Gadgets by status.phase.
var hcExprs = []kustomize.CustomHealthCheck{{
	APIVersion: "e2e.afterhooks.io/v1",
	Kind:       "Gadget",
	HealthCheckExpressions: kustomize.HealthCheckExpressions{
		Current: "has(status.phase) && status.phase == 'Ready'",
		Failed:  "has(status.phase) && status.phase == 'Broken'",
	},
}}

// TestHealthCheckExprs installs a chart whose custom resource only becomes
// ready when the test says so, with Helm's wait (beforeHooks) and with
// afterHooks; a failed expression fails the install; an expression that
// does not compile stops the HelmRelease before any Helm action.
func TestHealthCheckExprs(t *testing.T) {
	t.Parallel()

	for _, strategy := range []v2.HookWaitStrategy{v2.BeforeHooks, v2.AfterHooks} {
		t.Run(string(strategy)+"-waits-for-current", func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			hr := hcRelease(t, ns, strategy, 2*time.Minute)
			env.Create(t, hr)

			hcWaitGadget(t, ns, "app")
			if strategy == v2.AfterHooks {
				env.WaitEvent(t, ns, hr.Name, framework.EventWant{
					Type: corev1.EventTypeNormal, Reason: framework.AfterHooksWaitingReason,
					Contains: "Post-install hooks of app.v1 completed",
				})
			}
			// kstatus alone would be done by now; the expression keeps
			// the release pending.
			env.Consistently(t, 5*time.Second, "HelmRelease not Ready while the Gadget is not", func(ctx context.Context) error {
				if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
					return err
				}
				if c := conditions.Get(hr, meta.ReadyCondition); c != nil && c.Status == metav1.ConditionTrue {
					return fmt.Errorf("Ready=True %s: %s", c.Reason, c.Message)
				}
				return nil
			})
			if stored := env.Storage(t, ns, "app"); len(stored) != 1 || stored[0].Release.Info.Status != "pending-install" {
				t.Fatalf("Helm storage %s during the wait, want one pending-install revision", framework.Describe(stored))
			}

			hcSetGadgetPhase(t, ns, "app", "Ready")
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			env.WantStorage(t, ns, "app", "deployed")
		})
	}

	t.Run("failed-expression-fails-install", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		hr := hcRelease(t, ns, v2.BeforeHooks, 2*time.Minute)
		env.Create(t, hr)
		hcWaitGadget(t, ns, "app")
		started := time.Now()
		hcSetGadgetPhase(t, ns, "app", "Broken")

		env.Eventually(t, time.Minute, "install fails on the failed expression", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason)
		})
		// Failed is terminal for kstatus: Helm stops waiting at once
		// rather than at the two-minute timeout.
		if d := time.Since(started); d > time.Minute {
			t.Errorf("install failed after %s, want well before its timeout", d)
		}
		ready := conditions.Get(hr, meta.ReadyCondition)
		for _, want := range []string{"Gadget/" + ns + "/app", "status: 'Failed'", "failed expression is true: has(status.phase) && status.phase == 'Broken'"} {
			if !strings.Contains(ready.Message, want) {
				t.Errorf("Ready message %q, want it to contain %q", ready.Message, want)
			}
		}
		env.WantStorage(t, ns, "app", "failed")
	})

	t.Run("invalid-expression-stalls", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		hr := hcRelease(t, ns, v2.BeforeHooks, time.Minute)
		hr.Spec.HealthCheckExprs = []kustomize.CustomHealthCheck{{
			APIVersion: "e2e.afterhooks.io/v1", Kind: "Gadget",
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.phase =="},
		}}
		env.Create(t, hr)

		env.Eventually(t, time.Minute, "HelmRelease stalls on the invalid expression", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.StalledCondition, metav1.ConditionTrue, meta.InvalidCELExpressionReason); err != nil {
				return err
			}
			return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, meta.InvalidCELExpressionReason)
		})
		if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "Current") || !strings.Contains(msg, "left untouched") {
			t.Errorf("Ready message %q, want it to name the expression and say the release is untouched", msg)
		}
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: meta.InvalidCELExpressionReason,
			Contains: "status.phase ==",
		})
		if stored := env.Storage(t, ns, "app"); len(stored) != 0 {
			t.Errorf("Helm storage %s, want no release", framework.Describe(stored))
		}
	})
}

// TestHealthCheckCancelOnNewRevision runs a controller with the
// CancelHealthCheckOnNewRevision gate: an upgrade waits for a Gadget that
// does not become ready within the five-minute timeout; a spec change
// cancels the wait, the revision is failed and the new spec is upgraded at
// once. Without the gate (the shared controller) the same upgrade waits out
// its timeout first.
func TestHealthCheckCancelOnNewRevision(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		gate     bool
		strategy v2.HookWaitStrategy
		timeout  time.Duration
	}{
		{name: "beforeHooks", gate: true, strategy: v2.BeforeHooks, timeout: 5 * time.Minute},
		{name: "afterHooks", gate: true, strategy: v2.AfterHooks, timeout: 5 * time.Minute},
		{name: "gate-off-waits-out-the-timeout", strategy: v2.BeforeHooks, timeout: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			hr := hcRelease(t, ns, tt.strategy, tt.timeout)
			if tt.gate {
				ctl := env.StartShard(t, ns, framework.ControllerOptions{
					Shard: "cancel-" + rand.String(8),
					Args:  []string{"--feature-gates=CancelHealthCheckOnNewRevision=true"},
				})
				framework.Sharded(hr, ctl)
			}
			hr.Spec.Values = framework.JSON(`{"size":1}`)
			env.Create(t, hr)
			hcWaitGadget(t, ns, "app")
			hcSetGadgetPhase(t, ns, "app", "Ready")
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

			// Upgrade to size 2: the Gadget's generation moves on and
			// the expressions call it InProgress until the test
			// acknowledges it, which it does not.
			env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"size":2}`) })
			env.Eventually(t, time.Minute, "upgrade to size 2 waits", func(ctx context.Context) error {
				stored := env.Storage(t, ns, "app")
				if len(stored) != 2 || !stored[1].Release.Info.Status.IsPending() {
					return fmt.Errorf("Helm storage %s, want v2 pending", framework.Describe(stored))
				}
				return nil
			})
			time.Sleep(3 * time.Second) // let the readiness wait begin

			patched := time.Now()
			env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"size":3}`) })
			if tt.gate {
				env.WaitEvent(t, ns, hr.Name, framework.EventWant{
					Type: corev1.EventTypeNormal, Reason: meta.HealthCheckCanceledReason,
					Contains: "Health checks canceled due to new reconciliation triggered by HelmRelease/" + ns + "/app",
				})
			} else {
				env.Consistently(t, 15*time.Second, "without the gate v2 keeps waiting", func(ctx context.Context) error {
					if stored := env.Storage(t, ns, "app"); len(stored) != 2 || !stored[1].Release.Info.Status.IsPending() {
						return fmt.Errorf("Helm storage %s, want v2 still pending", framework.Describe(stored))
					}
					return nil
				})
			}
			env.Eventually(t, time.Minute, "upgrade to size 3 waits", func(ctx context.Context) error {
				stored := env.Storage(t, ns, "app")
				if len(stored) != 3 || !stored[2].Release.Info.Status.IsPending() {
					return fmt.Errorf("Helm storage %s, want v3 pending", framework.Describe(stored))
				}
				return nil
			})
			if d := time.Since(patched); tt.gate && d > time.Minute {
				t.Errorf("the new revision started %s after the spec change, want well before the five-minute timeout", d)
			}
			hcAcknowledgeGadget(t, ns, "app")
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 3})
			env.WantStorage(t, ns, "app", "superseded", "failed", "deployed")
			if stored := env.Storage(t, ns, "app"); len(stored) == 3 {
				desc := stored[1].Release.Info.Description
				// Helm's description ends with the wait's error; the
				// afterHooks wait says so itself.
				canceled := strings.Contains(desc, "context canceled") || strings.Contains(desc, "readiness wait canceled")
				if canceled != tt.gate {
					t.Errorf("v2 description %q: canceled = %v, want %v", stored[1].Release.Info.Description, canceled, tt.gate)
				}
			}
			if got := env.HasEvent(t, ns, hr.Name, meta.HealthCheckCanceledReason); got != tt.gate {
				t.Errorf("HealthCheckCanceled event recorded = %v, want %v", got, tt.gate)
			}
		})
	}
}

// hcRelease is a HelmRelease of the Gadget chart judged by hcExprs, with
// waitStrategy strategy and timeout for install and upgrade and no
// retries.
func hcRelease(t *testing.T, ns string, strategy v2.HookWaitStrategy, timeout time.Duration) *v2.HelmRelease {
	t.Helper()
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, hcChart, "0.1.0", ns)
	hr := framework.WithWaitStrategy(framework.Release(ns, "app", repo.Name, ref.Name, ref.Version, ""), strategy, timeout)
	hr.Spec.HealthCheckExprs = hcExprs
	return hr
}

func hcGadget(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(hcGadgetGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// hcWaitGadget waits until Helm has created the Gadget.
func hcWaitGadget(t *testing.T, ns, name string) {
	t.Helper()
	env.Eventually(t, time.Minute, "Gadget "+name+" created", func(ctx context.Context) error {
		return env.Get(ctx, hcGadget(ns, name), ns, name)
	})
}

// hcSetGadgetPhase writes status.phase of the Gadget, and its observed
// generation, as a controller of Gadgets would.
func hcSetGadgetPhase(t *testing.T, ns, name, phase string) {
	t.Helper()
	g := hcGadget(ns, name)
	if err := env.Get(context.Background(), g, ns, name); err != nil {
		t.Fatalf("Gadget %s: %v", name, err)
	}
	patch := fmt.Sprintf(`{"status":{"phase":%q,"observedGeneration":%d}}`, phase, g.GetGeneration())
	if err := env.Client.Status().Patch(context.Background(), g, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("patching the status of Gadget %s: %v", name, err)
	}
}

// hcAcknowledgeGadget marks the Gadget's current generation observed once
// Helm has applied the latest spec (size 3).
func hcAcknowledgeGadget(t *testing.T, ns, name string) {
	t.Helper()
	env.Eventually(t, time.Minute, "Gadget "+name+" at size 3", func(ctx context.Context) error {
		g := hcGadget(ns, name)
		if err := env.Get(ctx, g, ns, name); err != nil {
			return err
		}
		if size, _, _ := unstructured.NestedInt64(g.Object, "spec", "size"); size != 3 {
			return fmt.Errorf("Gadget size %d", size)
		}
		return nil
	})
	hcSetGadgetPhase(t, ns, name, "Ready")
}
