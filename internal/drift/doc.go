// Package drift finds where the objects of a deployed Helm release differ
// from its manifest in the cluster, and puts them back.
//
// Detection is a server-side apply dry-run of each manifest object as the
// field manager Helm deploys with (fluxcd/pkg/ssa/jsondiff), honouring the
// HelmRelease's ignore rules and the helm.toolkit.fluxcd.io/driftDetection:
// disabled label or annotation. Correction server-side applies the deleted
// and changed objects with the same field manager (fluxcd/pkg/ssa).
//
// The Checker reaches the cluster through the REST client getter it is
// given; the controller passes the one of the release's Helm configuration,
// so drift is checked where and as whom Helm deploys.
package drift
