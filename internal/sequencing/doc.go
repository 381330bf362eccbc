// Package sequencing applies a release's resources in order, as Helm's
// HIP-0025 ("Better Support for Resource Creation Sequencing") describes
// for charts: HelmReleases opt in with spec.waitStrategy.name "ordered".
//
// # The contract
//
//   - helm.sh/resource-group names the group of a resource;
//     helm.sh/depends-on/resource-groups (a JSON list) the groups of the
//     same chart that must be ready before it is applied.
//   - In Chart.yaml, the annotation helm.sh/depends-on/subcharts (a JSON
//     list of dependency names or aliases) makes the chart's own
//     resources wait for those subcharts, and a depends-on list on a
//     dependencies entry makes that subchart wait for its siblings. A
//     subchart is ready when all of its resources are.
//   - helm.sh/readiness-success and helm.sh/readiness-failure (both, or
//     neither) replace kstatus for one resource with expressions on its
//     status; failure wins.
//
// # How a release is ordered
//
// NewPlan (plan.go) turns the resources of a release into batches. Within
// a chart, groups are layered: a group's batch comes right after the last
// batch of the groups it needs, and groups that need the same depth share
// a batch. Resources without annotations, resources that need a group no
// resource belongs to, and isolated groups are unsequenced: they go in the
// last batch, which the action's own wait covers. Subcharts are units of
// their parent: a subchart others wait for is applied completely (its
// unsequenced resources in a waited batch of their own) before them; units
// of the same depth run side by side, their batches merged. A cycle fails
// the plan before anything is applied.
//
// # Where it plugs in
//
// Client (kube.go) wraps the Helm kube client of one action. Helm's install,
// upgrade and rollback hand it everything at once; it applies batch by
// batch and waits for each (wait.go) with the action's own waiter, so
// healthCheckExprs and the legacy strategy keep working, or with the
// custom readiness expressions (readiness.go). Deletions, by an upgrade
// that drops resources or by uninstall, go in the reverse order. Hooks
// pass through untouched, as the HIP leaves them to hook weights: the
// client only orders objects it saw in a release manifest.
//
// Timeouts: the action's timeout bounds the whole sequenced apply; every
// batch waits at most until the action's deadline. The HIP's separate
// per-resource readiness timeout (one minute by default) has no field of
// its own here: the action timeout (spec.timeout, or the action's) plays
// its part.
//
// Record (record.go) marks a revision applied in order, with the subchart
// facts Helm does not keep, so a rollback to it and its uninstall use the
// same order.
package sequencing
