package v2

import (
	"crypto/sha256"
	"encoding/hex"
)

// maxReleaseNameLength is Helm's limit for release names.
const maxReleaseNameLength = 53

// ReleaseName returns the name the release of obj has in Helm:
// GetReleaseName (spec.releaseName, or "[targetNamespace-]name"),
// shortened when longer than Helm allows (see ShortenReleaseName). Every
// package that names the release in Helm storage or compares it with the
// status uses this one, so the name cannot differ between them.
func ReleaseName(obj *HelmRelease) string {
	return ShortenReleaseName(obj.GetReleaseName())
}

// ShortenReleaseName keeps names of up to 53 characters. Longer ones become
// their first 40 characters, a dash and the first 12 hex characters of the
// SHA-256 of the whole name: 53 characters, stable, and unlikely to collide.
func ShortenReleaseName(name string) string {
	if len(name) <= maxReleaseNameLength {
		return name
	}
	const hashLen = 12
	sum := sha256.Sum256([]byte(name))
	return name[:maxReleaseNameLength-hashLen-1] + "-" + hex.EncodeToString(sum[:])[:hashLen]
}
