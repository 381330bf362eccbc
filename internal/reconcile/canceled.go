package reconcile

import (
	"fmt"
)

// HealthCheckCanceledError is the error of an action whose readiness wait
// was abandoned because something asked for a new reconcile of the
// HelmRelease meanwhile (the CancelHealthCheckOnNewRevision feature gate).
// Helm failed the revision; the machine neither retries nor remediates it
// in this reconcile: the next one, already queued, decides with the new
// desired state.
type HealthCheckCanceledError struct {
	// Trigger names the object whose change asked for the new reconcile,
	// as "Kind/namespace/name".
	Trigger string
	// Err is the action's error.
	Err error
}

func (e *HealthCheckCanceledError) Error() string {
	return fmt.Sprintf("New reconciliation triggered by %s", e.Trigger)
}

func (e *HealthCheckCanceledError) Unwrap() error { return e.Err }
