// Package helmclient is the seam between the controller and Helm's kube
// client. Helm builds its client for one action at a time; a controller runs
// thousands of actions against the same cluster, so what Helm would work out
// again for every action is kept here once per cluster and shared:
//
//   - FieldValidation: which kinds the API server validates itself (the
//     fieldValidation query parameter). Helm finds out from the server's
//     OpenAPI v3 document, which it fetches and decodes for every action
//     because each action invalidates discovery to read fresh capabilities.
//   - Client: Helm's kube client whose status waits list and watch only the
//     objects they wait for, by name, where Helm's waiter watches every
//     object of their kinds in the namespace; Helm's waiter still decides.
//     A Job with spec.ttlSecondsAfterFinished that is gone reaches those
//     waits as it finished, as the wait or the client's Job tracker saw
//     it, or as failed when nothing saw it finish (jobs.go), so that waits
//     neither hang on Jobs Kubernetes deleted nor count a failed one done.
//   - Jobs: Create and Update hand every self-deleting Job they apply to a
//     jobttl.Tracker, shared per cluster (Clusters.Jobs).
//
// Every apply also strips the HIP-0025 annotation the API server refuses
// (StripUnappliable), ordered or not: the release manifest keeps it for
// internal/sequencing to read.
//
// internal/action builds every Helm configuration through NewClient.
package helmclient
