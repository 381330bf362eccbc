// Package preview computes what the next reconcile of a HelmRelease would
// do, without doing it: the `helm-controller plan` command prints it.
//
// Nothing here decides anything of its own. The step comes from
// reconcile.Predict (the observation and the decision the state machine
// acts on), the action's decisions (hook order, waits, ordering, recreate
// policy) from the runner's plan functions (runner.Plan), the manifest and
// hooks from Helm's server-side dry run of the same action
// (runner.DryRun), the objects refused in place from the drift checker's
// dry run (runner.DetectRefused) and whether each is recreated from the
// recreate layer's own checks (recreate.Policy.Judge), the ordered
// batches from internal/sequencing's planner and the hook leftovers of an
// uninstall from the cleanup's own judgement (action.HookLeftovers). What this package adds is the comparison of the
// rendered manifest with the stored one (objects to create, update,
// delete or keep), the values keys that changed, the order of the hooks
// (Helm's: by weight, then name) and the printing.
//
// A preview only reads: Helm storage, the live objects the dry run, the
// recreate judgement and the hook cleanup look up, and dry-run requests.
// The controller computes one on request too (planRequestedAt, in
// internal/controller), over the runner it would act with.
package preview
