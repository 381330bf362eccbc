package recreate

import (
	"context"
)

// Verdict is what an update refused for an immutable field would come
// to, decided by the checks a recreate passes before it deletes anything
// (decide), without doing it: a plan shows it.
type Verdict struct {
	// Object is Kind/namespace/name; Fields what the API server refused.
	Object string `json:"object"`
	Fields string `json:"fields"`
	// Recreate: the object would be deleted and created again, as
	// Consent allows (or created, when it is gone meanwhile).
	Recreate bool    `json:"recreate"`
	Consent  Consent `json:"consent,omitempty"`
	// Refusal, when it would not be recreated, says why, as the action's
	// error (an *ImmutableError) would after the object and fields: the
	// guard that stops it, or what would give consent.
	Refusal string `json:"refusal,omitempty"`
}

// Judge decides whether r would be recreated, as Recreate decides it,
// with reads and dry runs only: r's patch in place (Refused.InPlace) is
// not tried, since it writes; a plan's refusal comes from a patch anyway.
func (p Policy) Judge(ctx context.Context, r Refused) Verdict {
	r.InPlace = nil
	ierr := &ImmutableError{Object: r.Object, Fields: Fields(r.Cause), Err: r.Cause}
	v := Verdict{Object: r.Object, Fields: ierr.Fields}
	d, err := p.decide(ctx, &r, ierr)
	if err != nil {
		v.Refusal = ierr.Advice
		return v
	}
	v.Recreate, v.Consent = true, d.by
	return v
}
