// Package reconcile is the release state machine of a HelmRelease.
//
// Machine (machine.go) holds the Helm client, the event recorder and the
// clock; it records what each reconcile attempts and makes Ready False
// when one fails. Its Run (dispatch.go) observes the release in Helm
// storage and the HelmRelease's status.history, decides one state (see
// state.go), runs the action that state calls for (install.go,
// upgrade.go, reinstall.go, test.go, rollback.go, uninstall.go) and
// repeats until the release is in sync or an action failed. A release in
// sync is compared with the cluster when spec.driftDetection asks for it,
// and its drift reported or corrected (drift.go). A failed action is
// retried later or remediated as upstream helm-controller does
// (failures.go, remediation.go). Every action records a snapshot in
// status.history, sets the Released/TestSuccess/Remediated conditions and
// emits an event.
//
// A stop of the controller (a rollout, a crash, lost leadership) can cut an
// action short, and the next run finds what it left: recovery.go records
// an install, upgrade or rollback of its own (the revision carries the
// controller's mark, see internal/ownrevision) that Helm finished but
// status.history does not, and completes an interrupted rollback or
// uninstall remediation; a
// revision held pending for its readiness wait is resumed (resume.go), or
// released when the desired state changed since; a release left pending
// by an action that never finished is unlocked (unlock.go). A readiness
// wait cancelled for a new revision leaves its remediation to the next
// reconcile (canceled.go).
//
// Helm itself is behind the Helm interface, so the state machine is tested
// without a cluster.
package reconcile
