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
//     resources wait for those subcharts; a depends-on list on a
//     dependencies entry, or the entry's key in the annotation
//     helm.sh/depends-on/dependencies (a JSON object; packaging keeps
//     annotations and drops depends-on), makes that subchart wait for its
//     siblings. A subchart is ready when all of its resources are.
//   - helm.sh/readiness-success and helm.sh/readiness-failure (both, or
//     neither) replace kstatus for one resource with expressions on its
//     status; failure wins.
//
// # How a release is ordered
//
// NewPlan (plan.go) turns the resources of a release into a graph of
// batches. Within a chart, groups are layered: a layer is applied once the
// layer before it is ready. Resources without annotations, resources that
// need a group no resource belongs to, and isolated groups are
// unsequenced: they come after the chart's groups. Subcharts are units of
// their parent: a unit waits for the units it names to be complete, and
// units that do not need each other progress independently. A batch is
// waited for only when a later batch needs it. A cycle fails the plan
// before anything is applied.
//
// # Where it plugs in
//
// Client (kube.go) wraps the Helm kube client of one action. Helm's install,
// upgrade and rollback hand it everything at once; it applies batch by
// batch and waits for each batch something needs (wait.go) with the
// action's own waiter, so healthCheckExprs and the legacy strategy keep
// working, or with the custom readiness expressions (readiness.go).
// Deletions, by an upgrade that drops resources or by uninstall, go in the
// reverse order, as Helm's delete logic decides what is deleted; a batch
// that cannot be deleted in time is reported and the rest deleted all the
// same. Hooks pass through untouched, as the HIP leaves them to hook
// weights: the client only orders objects it saw in a release manifest.
//
// Timeouts: the action's deadline bounds the whole sequenced action;
// Options.ReadinessTimeout (spec.waitStrategy.readinessTimeout) bounds
// each batch's wait within it.
//
// DryRun (dryrun.go) renders a chart without a cluster and returns its
// plan, for chart authors to check their annotations.
//
// Record (record.go) marks a revision applied in order, with the subchart
// facts Helm does not keep, so a rollback to it and its uninstall use the
// same order.
package sequencing
