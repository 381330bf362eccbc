package controller

import "github.com/opencontainers/go-digest"

// snapshotDigestAlgorithm hashes the values and release digests recorded in
// status (--snapshot-digest-algo). Unset means sha256, upstream's default,
// whose digests let either controller take over the other's releases.
func (r *HelmReleaseReconciler) snapshotDigestAlgorithm() digest.Algorithm {
	if r.SnapshotDigestAlgorithm == "" {
		return digest.Canonical
	}
	return r.SnapshotDigestAlgorithm
}
