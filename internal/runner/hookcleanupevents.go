package runner

import (
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/afterhooks/helm-controller/internal/action"
)

// Reasons of the events about spec.uninstall.deleteHookResources.
const (
	// HookResourcesDeletedReason: an uninstall deleted objects its
	// release's hooks had left.
	HookResourcesDeletedReason = "HookResourcesDeleted"
	// HookResourcesLeftReason: an uninstall found objects under the names
	// of its release's hooks that it may not delete (kept, never deleted
	// kinds, a Job or Pod still running, no proof that this release's
	// hooks created them).
	HookResourcesLeftReason = "HookResourcesLeft"
	// HookCleanupFailedReason: the release was uninstalled, but some of
	// the objects its hooks left could not be deleted.
	HookCleanupFailedReason = "HookCleanupFailed"
)

// hookResourcesDeleted reports the hook objects an uninstall deleted.
func (r *Runner) hookResourcesDeleted(deleted []string) {
	r.event(helmv2.ActionHelmUninstall, corev1.EventTypeNormal, HookResourcesDeletedReason,
		fmt.Sprintf("Deleted %d object(s) left by the hooks of release %s: %s", len(deleted), r.releaseName(), listed(deleted)))
}

// hookResourcesLeft reports the objects an uninstall found under the
// names of its release's hooks and did not delete, each with the reason,
// so that nothing is left behind unsaid.
func (r *Runner) hookResourcesLeft(left []string) {
	r.event(helmv2.ActionHelmUninstall, corev1.EventTypeNormal, HookResourcesLeftReason,
		fmt.Sprintf("Left %d object(s) found under the names of the hooks of release %s: %s", len(left), r.releaseName(), listed(left)))
}

// hookCleanupFailed turns a failed hook cleanup into a Warning event and
// reports the uninstall as the success it was. Failing it would record a
// failed uninstall (for a remediation, a failure that counts against its
// retries) although the release is gone, and a retry would not clean up
// again: without a release there are no records listing the hooks.
func (r *Runner) hookCleanupFailed(err error) error {
	var cleanup *action.HookCleanupError
	if !errors.As(err, &cleanup) {
		return err
	}
	r.event(helmv2.ActionHelmUninstall, corev1.EventTypeWarning, HookCleanupFailedReason, cleanup.Error())
	return withoutHookCleanup(err)
}

// withoutHookCleanup is what else err holds besides the hook cleanup's
// failure: the uninstall's records that could not be ended are a failure
// of the uninstall itself, which a retry finishes.
func withoutHookCleanup(err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var rest []error
	for _, e := range joined.Unwrap() {
		var cleanup *action.HookCleanupError
		if !errors.As(e, &cleanup) {
			rest = append(rest, e)
		}
	}
	return errors.Join(rest...)
}
