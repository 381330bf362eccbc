// Package reconcile is the release state machine of a HelmRelease.
//
// Each reconcile observes the release in Helm storage and the HelmRelease's
// status.history, decides one state (see state.go), runs the action that
// state calls for (install.go, upgrade.go, test.go, rollback.go,
// uninstall.go, unlock.go) and repeats until the release is in sync or an
// action failed. A release in sync is compared with the cluster when
// spec.driftDetection asks for it, and its drift reported or corrected
// (drift.go). Failed actions are remediated as upstream helm-controller
// does (remediation.go). Every action records a snapshot in status.history,
// sets the Released/TestSuccess/Remediated conditions and emits an event.
//
// Helm itself is behind the Helm interface, so the state machine is tested
// without a cluster.
package reconcile
