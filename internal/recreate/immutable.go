package recreate

import (
	"errors"
	"fmt"
	"strings"

	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// IsImmutable tells whether err refuses an update the way an immutable
// field does, as Flux's server-side apply manager (and kubectl replace
// --force) decide it: an Invalid or Conflict answer, or a message of an
// admission webhook or CEL rule saying so. The answer is broad on purpose;
// Replace only deletes an object after the API server accepted its new
// version as a new object. One Conflict is left out: a write that lost a
// race with another writer (a replace while an autoscaler scales), which
// a retry fixes and the dry run cannot tell apart.
func IsImmutable(err error) bool {
	if err == nil || apierrors.IsConflict(err) && strings.Contains(err.Error(), optimisticLock) {
		return false
	}
	return ssaerrors.IsImmutableError(err)
}

// optimisticLock is how the API server words a write based on an old
// resourceVersion (k8s.io/apiserver's registry.OptimisticLockErrorMsg).
const optimisticLock = "the object has been modified; please apply your changes to the latest version"

// ImmutableError is an update of Object the API server refused in place,
// with why it was not recreated.
type ImmutableError struct {
	// Object is Kind/namespace/name (Kind/name when cluster-scoped).
	Object string
	// Fields says which fields were refused and why.
	Fields string
	// Advice says why the object was not recreated, or what happened when
	// recreating it failed.
	Advice string
	Err    error
}

func (e *ImmutableError) Error() string {
	return fmt.Sprintf("%s: %s; %s", e.Object, e.Fields, e.Advice)
}

func (e *ImmutableError) Unwrap() error { return e.Err }

// maxCause bounds a refused field's explanation: an Invalid value is
// printed whole (a Job's pod template as JSON), the reason comes last.
const maxCause = 160

// Fields describes what err refused: each field the API server named with
// the reason it gave ("spec.template: field is immutable"), or the
// server's message when it named none.
func Fields(err error) string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return shorten(err.Error())
	}
	s := status.Status()
	var causes []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Field == "" {
				causes = append(causes, shorten(c.Message))
				continue
			}
			causes = append(causes, c.Field+": "+shorten(c.Message))
		}
	}
	if len(causes) == 0 {
		return shorten(s.Message)
	}
	return strings.Join(causes, ", ")
}

// shorten keeps what follows the last ": " of a long message, where
// Kubernetes puts the reason after the value it refused.
func shorten(msg string) string {
	if len(msg) <= maxCause {
		return msg
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 && len(msg)-i-2 <= maxCause {
		return msg[i+2:]
	}
	return msg[:maxCause] + "…"
}
