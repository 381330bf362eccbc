// Package runner is the Helm side of a reconcile: Runner implements the
// release state machine's Helm port (reconcile.Helm) for one HelmRelease.
//
// The reconciler (internal/controller) resolves the chart, values and
// target cluster, builds a Runner with New, and hands it to the state
// machine (internal/reconcile), which calls Install, Upgrade, Rollback,
// Test, Uninstall, ResumeWait, DetectDrift and CorrectDrift. A Runner
// owns:
//
//   - the release's Helm configuration, built once per reconcile (kube
//     client and Secret storage on the target cluster, Helm's log tail
//     for failure events, the log of what was written to storage);
//   - the plan of each action (plan.go, internal/plan): every decision
//     the action and the observers act on, made once: the verb, the hook
//     order, the waits, the ordering (from the spec, or from the stored
//     revision a rollback or uninstall follows, read here), the apply
//     method (Helm's serverSideApply auto resolved from the revision an
//     upgrade starts from or a rollback restores, read here), the
//     post-render strategy, the release's one recreate policy, which
//     drift correction (driftcheck.go) shares, and the hook marks.
//     internal/action stacks the feature wrappers
//     (recreate, afterHooks, ordering) from the plan alone;
//   - what a Flux user sees of a running action: one action.Observer per
//     action (observer.go) turns what internal/action tells it into events
//     (the *events.go files), progress through the Progress interface the
//     reconciler implements, and the phase duration metric (metrics.go);
//   - why a failed readiness wait is stuck (waitcause.go, internal/waitcause),
//     added to the action's error before it becomes the failure's condition
//     and event.
//
// An afterHooks upgrade goes reconcile (upgrade.go) → runner (runner.go:
// Upgrade, plan.go) → action (upgrade.go, stack.go, layer_afterhooks.go)
// → afterhooks (run.go: Start, then the finish after Helm's upgrade) →
// Helm's upgrade and storage. An ordered upgrade
// goes reconcile → runner → action (upgrade.go, stack.go,
// layer_ordering.go) → sequencing (kube.go) → Helm's kube client.
package runner
