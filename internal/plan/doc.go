// Package plan holds what the runner (internal/runner) decides about one
// Helm action before it runs, as one value: the verb, the order of the
// readiness wait and the post hooks (the hook order), whether and from
// what the action applies in order, the recreate policy, the hook marks,
// the wait settings, whether objects are applied server-side (Helm's
// "auto" resolved from the stored revision the runner read) and the
// post-render strategy. internal/action builds its stack of wrappers and
// Helm's options from a Plan and nothing else, so every such decision is
// made once, in
// the runner, and the same value can be printed (a preview of the next
// reconcile shows it).
//
// Three strategies are told apart by name here: the hook order
// (HookOrder: beforeHooks or afterHooks, the API's
// install/upgrade/rollback waitStrategy field), the API's
// spec.waitStrategy.name (poller, legacy or ordered), which picks Helm's
// readiness strategy and whether the action is ordered, and Helm's own
// kube.WaitStrategy (Wait.Helm and Wait.Readiness).
//
// Verb is the one name of a Helm action in the runner, internal/action,
// internal/afterhooks and internal/reconcile; it is internal/helmverb's,
// whose EventAction maps it to the Flux event action.
package plan
