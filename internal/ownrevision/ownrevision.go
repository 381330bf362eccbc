// Package ownrevision marks the Helm revisions the controller creates, so
// that crash recovery can tell them from revisions anyone else made.
//
// A controller killed after Helm stored a revision and before the
// HelmRelease's status recorded it finds, on restart, a revision its
// history does not describe. If that revision is its own, it is finished
// (recorded, not made again with its hooks); if it was made by hand with
// the helm CLI (a rollback, an upgrade with the same chart and values), it
// is a release the HelmRelease did not make, and upgraded over, as
// upstream helm-controller does. Descriptions, charts and values cannot
// tell the two apart: the CLI writes the same ones.
//
// # The mark
//
// Every revision an install, upgrade or rollback of the controller
// creates carries the release label Label. Its value binds three things:
// the revision's own number, the HelmRelease (its UID) and the digest of
// the status.history snapshot the action started from (none for an
// install, which starts the history afresh). Helm keeps release labels
// as labels of the release Secret, and copies a revision's labels into
// the next one on upgrade and rollback; a copied mark names another
// revision number, so it never matches the revision it was copied into.
// The controller checks a mark against the status it reads back: the
// history's latest snapshot and the HelmRelease it reconciles.
//
// The label is written by a storage driver wrapper (Stamp) on the first
// revision an action creates, on its Create and on every later Update of
// it, so Helm's own writes of that revision (hook results, the final
// status) keep it.
package ownrevision

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"

	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// Label is the release label that marks a revision this controller made.
const Label = "helm.toolkit.fluxcd.io/own-revision"

// hashLength is how many hex characters of the digest a mark keeps: 160
// bits, and a label value well within Kubernetes' 63 characters.
const hashLength = 40

// Mark identifies one action of one HelmRelease: which HelmRelease, and
// which recorded state it started from.
type Mark struct {
	// Owner identifies the HelmRelease: its UID (a recreated HelmRelease
	// of the same name is another owner).
	Owner string
	// After is the digest of the status.history snapshot the action
	// started from; empty when the history was empty (an install).
	After string
}

// Value is the label value of the revision version made by the action m
// identifies: the version, a dash and a hash of the three.
func (m Mark) Value(version int) string {
	v := strconv.Itoa(version)
	sum := sha256.Sum256([]byte(strings.Join([]string{"own-revision", m.Owner, m.After, v}, "\x00")))
	return v + "-" + hex.EncodeToString(sum[:])[:hashLength]
}

// Marks tells whether rel carries the mark m gives its version: whether
// the action m identifies made rel.
func (m Mark) Marks(rel *releasev1.Release) bool {
	if rel == nil {
		return false
	}
	value, ok := rel.Labels[Label]
	return ok && value == m.Value(rel.Version)
}

// Labelled returns a copy of rel with m's mark for its version, leaving
// rel and its labels as they were (Helm may share them with the revision
// it copied them from).
func (m Mark) Labelled(rel *releasev1.Release) *releasev1.Release {
	c := *rel
	c.Labels = maps.Clone(rel.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[Label] = m.Value(rel.Version)
	return &c
}
