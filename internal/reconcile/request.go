package reconcile

import (
	"context"
	// sha384 and sha512 digests (--snapshot-digest-algo) need the hash
	// registered with crypto.
	_ "crypto/sha512"

	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
)

// Helm runs Helm actions for one HelmRelease. internal/runner implements it
// over the Helm SDK; tests use a fake.
type Helm interface {
	// LastRelease returns the newest release in storage, or an error
	// satisfying errors.Is(err, driver.ErrReleaseNotFound).
	LastRelease(ctx context.Context) (*releasev1.Release, error)
	// LastWritten returns the release record the actions of this Helm
	// last wrote to storage (and did not delete since), as it was written,
	// or nil: what an action stored, known without reading storage back.
	LastWritten() *releasev1.Release
	// Install, Upgrade and Rollback label the revision they create with
	// mark (see internal/ownrevision), which tells crash recovery the
	// revision is the controller's own.
	Install(ctx context.Context, chart *chartv2.Chart, values map[string]any, mark ownrevision.Mark) (*releasev1.Release, error)
	Upgrade(ctx context.Context, chart *chartv2.Chart, values map[string]any, mark ownrevision.Mark) (*releasev1.Release, error)
	Test(ctx context.Context) (*releasev1.Release, error)
	Rollback(ctx context.Context, toVersion int, mark ownrevision.Mark) error
	Uninstall(ctx context.Context) error
	// Unlock marks a release stuck in a pending state as failed, so the
	// next action can take it over.
	Unlock(ctx context.Context, rel *releasev1.Release) error
	// ResumeWait finishes the afterHooks readiness wait of rel, a revision
	// left pending by an earlier run (see internal/afterhooks). It returns
	// the revision as stored at the end (deployed or failed).
	ResumeWait(ctx context.Context, rel *releasev1.Release) (*releasev1.Release, error)
	// DetectDrift compares the objects of rel's manifest with the cluster
	// as spec.driftDetection configures it. With an error the set holds
	// the objects that could be compared.
	DetectDrift(ctx context.Context, rel *releasev1.Release) (jsondiff.DiffSet, error)
	// CorrectDrift restores the deleted and changed objects of set and
	// returns what it applied, also when it fails part-way.
	CorrectDrift(ctx context.Context, set jsondiff.DiffSet) (*ssa.ChangeSet, error)
}

// Chart is the desired chart: its metadata is always at hand; Load parses
// a fresh copy only when an action needs one.
type Chart interface {
	Metadata() *chartv2.Metadata
	Load() (*chartv2.Chart, error)
}

// Request is what one reconcile of a release works on.
type Request struct {
	Object *v2.HelmRelease
	// ReleaseName is the Helm release name (shortened when the HelmRelease
	// name is too long); used in messages.
	ReleaseName string
	Chart       Chart
	// Values are the composed values (spec.values with spec.valuesFrom).
	Values map[string]any
	// ConfigDigest identifies Values; it is recorded in snapshots and
	// compared to decide whether the release is out of sync.
	ConfigDigest string
	// OCIDigest is the digest of an OCIRepository artifact, when the chart
	// comes from one.
	OCIDigest string
	// Force asks for an install or upgrade even when the release is in
	// sync (the reconcile.fluxcd.io/forceAt annotation).
	Force bool
	// DefaultToRetryOnFailure is the feature gate of the same name.
	DefaultToRetryOnFailure bool
	// DigestAlgorithm hashes the release and values digests of new
	// snapshots (--snapshot-digest-algo); empty means sha256, the
	// algorithm upstream helm-controller uses by default.
	DigestAlgorithm digest.Algorithm

	// previousOCIDigest is the OCI artifact digest the previous reconcile
	// attempted, which made any revision it left pending.
	previousOCIDigest string

	// specChanged is set by the machine when the HelmRelease's generation
	// differs from the one its previous reconcile attempted: a revision
	// that reconcile left pending was made from another spec.
	specChanged bool
}

// digestAlgorithm is the algorithm of new snapshot digests.
func (r *Request) digestAlgorithm() digest.Algorithm {
	if r.DigestAlgorithm == "" {
		return digest.Canonical
	}
	return r.DigestAlgorithm
}

// valuesMatch tells whether recorded, a values digest of any supported
// algorithm, identifies the values of this request. Comparing by content
// rather than by string keeps a change of --snapshot-digest-algo from
// looking like a change of values.
func (r *Request) valuesMatch(recorded string) bool {
	if recorded == r.ConfigDigest {
		return true
	}
	d := digest.Digest(recorded)
	if d.Validate() != nil || d.Algorithm() == digest.Digest(r.ConfigDigest).Algorithm() {
		// Same algorithm, different digest: the values differ.
		return false
	}
	return chartutil.VerifyValues(d, r.Values)
}
