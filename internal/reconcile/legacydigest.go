package reconcile

import (
	"crypto"
	_ "crypto/sha1" // the legacy values checksum only; never used to record
	"encoding/hex"

	"github.com/opencontainers/go-digest"
)

// legacyValuesAlgorithm is the hash of the deprecated
// status.lastAttemptedValuesChecksum (hex SHA-1 of the values) that older
// upstream controllers wrote. It is registered only to read that field.
const legacyValuesAlgorithm digest.Algorithm = "sha1"

func init() {
	digest.RegisterAlgorithm(legacyValuesAlgorithm, crypto.SHA1)
}

// lastAttemptedValuesDigest is the digest of the values of the last
// attempt: status.lastAttemptedConfigDigest, or, for a status written by an
// old controller, the deprecated SHA-1 checksum, as upstream falls back to
// it. Empty when neither is known.
func lastAttemptedValuesDigest(configDigest, legacyChecksum string) string {
	if configDigest != "" || legacyChecksum == "" {
		return configDigest
	}
	if _, err := hex.DecodeString(legacyChecksum); err != nil {
		return ""
	}
	return digest.NewDigestFromEncoded(legacyValuesAlgorithm, legacyChecksum).String()
}
