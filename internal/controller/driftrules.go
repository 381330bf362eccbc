package controller

import (
	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/drift"
)

// InvalidDriftDetectionReason: the Warning event about a
// spec.driftDetection ignore rule that does not do what it reads as (a path
// that is not a JSON pointer, a target that does not compile). As upstream,
// such a rule stops nothing: drift detection uses it the way upstream's
// does.
const InvalidDriftDetectionReason = "InvalidDriftDetection"

// driftIgnoreRules converts the ignore rules of spec.driftDetection and
// names those that do not do what they read as. Rules of a HelmRelease
// that does not detect drift are not looked at, as they are not used.
func driftIgnoreRules(obj *v2.HelmRelease) (drift.Rules, []string) {
	dd := obj.GetDriftDetection()
	if !dd.MustDetectChanges() {
		return drift.Rules{}, nil
	}
	return drift.IgnoreRules(dd.Ignore)
}
