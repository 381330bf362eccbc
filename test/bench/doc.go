// Package bench measures a fleet of HelmReleases reconciled by upstream
// Flux helm-controller and by this controller, side by side, on the same
// local cluster set-up (`make bench`, hack/bench).
//
// Every run (one controller, one fleet size N) gets a fresh cluster from
// test/cluster with three fake nodes and the real source-controller, a chart
// server from test/chartserver publishing the shared podinfo chart, one
// namespace and one HelmRepository. Once the repository is Ready the
// controller binary starts as a plain process on the machine, and two phases
// are measured:
//
//   - install: N podinfo HelmReleases (podinfo-0 … podinfo-N-1, default
//     install settings, interval 10m) are created at once and listed every
//     second until all are Ready for their generation. Reported: the wall
//     time from the first create to all Ready, the controller's CPU time
//     (utime+stime from /proc), the growth of the API server's
//     apiserver_request_total and of the controller's own
//     rest_client_requests_total, each per release.
//   - no-op: after a pause for things to settle, every release gets a new
//     reconcile.fluxcd.io/requestedAt annotation, and the phase lasts until
//     every release reports it in status.lastHandledReconcileAt and is still
//     Ready. Nothing changed, so this is the cost of a reconcile that has
//     nothing to do: controller CPU per release.
//
// Peak RSS is VmHWM from /proc just before the controller is stopped. Then
// a third phase:
//
//   - restart: the controller is stopped (SIGTERM) and started again with
//     the fleet deployed, as a rollout of the controller would. The phase
//     lasts until the new process has reconciled every release once, read
//     from the per-object Flux metric gotk_reconcile_duration_seconds_count
//     both binaries export. Reported: that time, the new process's CPU
//     from its start, and the Helm revisions the fleet gained since the
//     install phase (no-op and restart together), which must be 0: a run
//     with a new revision fails.
//
// With Options.Shards the controller runs as that many processes, each
// with --watch-label-selector=sharding.fluxcd.io/key=shard<i>, and the
// fleet is dealt out to them in turn; CPU, requests and peak RSS are the
// sums over the shards, and a run in which a shard's controller
// reconciled a release of another shard fails.
//
// Ours runs as the image ships it (static, stripped), as upstream's tool
// binary is built. The controller "ours-afterhooks" is ours with the fleet
// installed and upgraded with waitStrategy afterHooks.
//
// What the numbers include:
//
//   - apiserver_request_total counts every client of the API server:
//     kube-controller-manager, the scheduler and kwok creating and running
//     the podinfo pods, source-controller building one HelmChart per release,
//     and this package polling once a second. Its per-release figure is
//     dominated by that shared work; the controller's own
//     rest_client_requests_total (both binaries are controller-runtime
//     managers that export it) isolates what the controller asked for.
//   - CPU is measured from just before the first create, after the controller
//     has gone idle following its start-up, so start-up work is left out.
//     Each phase reads it after this package's scrapes of the controller's
//     /metrics when it begins and before them when it ends, so rendering
//     the metrics (one series per release) is not counted.
//     When profiling is asked for, a CPU profile is taken during each phase
//     (install, no-op) and its overhead is in that phase's numbers; heap
//     profiles just before and after the no-op phase give what it allocated.
//
// Chart downloads are read from this controller's
// helm_controller_chart_downloads_total counter. Upstream has no such
// counter, and counting its downloads honestly would need a counting proxy
// in front of source-controller's artifact server. The artifact URLs that
// source-controller writes into HelmChart statuses carry the address it
// advertises, which test/cluster sets to the artifact server's own address
// with no way to point it elsewhere; and Go's HTTP client never sends
// requests for loopback addresses through an HTTP_PROXY. So upstream's
// downloads are reported as n/a.
//
// All traffic stays on 127.0.0.1. Timings depend on the machine; callers
// must not assert on them.
package bench
