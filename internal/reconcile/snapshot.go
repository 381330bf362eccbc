package reconcile

import (
	"encoding/json"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// newSnapshot describes rel for status.history, the way upstream
// helm-controller does, so either controller can read the other's history.
func newSnapshot(req *Request, rel *releasev1.Release, action helmv2.ReleaseAction) *helmv2.Snapshot {
	algo := req.digestAlgorithm()
	s := &helmv2.Snapshot{
		Digest:       releaseDigest(algo, rel, req.OCIDigest).String(),
		Name:         rel.Name,
		Namespace:    rel.Namespace,
		Version:      rel.Version,
		Action:       action,
		ConfigDigest: chartutil.DigestValues(algo, rel.Config).String(),
		OCIDigest:    req.OCIDigest,
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		s.ChartName = rel.Chart.Metadata.Name
		s.ChartVersion = rel.Chart.Metadata.Version
		s.AppVersion = rel.Chart.Metadata.AppVersion
	}
	if rel.Info != nil {
		s.Status = rel.Info.Status.String()
		s.FirstDeployed = metaTime(rel.Info.FirstDeployed)
		s.LastDeployed = metaTime(rel.Info.LastDeployed)
		s.Deleted = metaTime(rel.Info.Deleted)
	}
	return s
}

func metaTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t)
}

// observedRelease is the part of a release its snapshot digest covers:
// everything but the chart's files, and without test hooks, so that running
// tests does not change the digest. Field names and order match upstream's
// encoding, which makes digests comparable across the two controllers.
type observedRelease struct {
	Name          string           `json:"name"`
	Version       int              `json:"version"`
	Info          releasev1.Info   `json:"info"`
	ChartMetadata chartv2.Metadata `json:"chartMetadata"`
	Config        map[string]any   `json:"config"`
	Manifest      string           `json:"manifest"`
	Hooks         []releasev1.Hook `json:"hooks"`
	Namespace     string           `json:"namespace"`
	OCIDigest     string           `json:"ociDigest,omitempty"`
}

// releaseDigest identifies the content and state of a release, hashed with
// algo.
func releaseDigest(algo digest.Algorithm, rel *releasev1.Release, ociDigest string) digest.Digest {
	o := observedRelease{Name: rel.Name, Version: rel.Version, Manifest: rel.Manifest, Namespace: rel.Namespace, OCIDigest: ociDigest}
	if rel.Info != nil {
		o.Info = *rel.Info
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		o.ChartMetadata = *rel.Chart.Metadata
	}
	if len(rel.Config) > 0 {
		o.Config = rel.Config
	}
	for _, h := range rel.Hooks {
		if h != nil && !isTestHook(h) {
			o.Hooks = append(o.Hooks, *h)
		}
	}
	digester := algo.Digester()
	if err := json.NewEncoder(digester.Hash()).Encode(o); err != nil {
		// Release content always encodes (Helm stores it as JSON); fall back
		// to the identity of the release rather than fail over a digest.
		return algo.FromString(releaseID(rel))
	}
	return digester.Digest()
}

// recordSnapshot puts a snapshot of rel at the head of the history, or
// replaces the head when it describes the same release version (a test
// run, an unlock). The history is cut where upstream cuts it
// (cutHistory), not here: a failure keeps the revisions before it.
func recordSnapshot(req *Request, rel *releasev1.Release, action helmv2.ReleaseAction) *helmv2.Snapshot {
	status := &req.Object.Status
	s := newSnapshot(req, rel, action)
	if latest := status.History.Latest(); latest != nil && latest.Targets(rel.Name, rel.Namespace, rel.Version) {
		// Keep what only the earlier snapshot knows: its action and tests.
		if s.Action == "" {
			s.Action = latest.Action
		}
		s.TestHooks = latest.TestHooks
		*latest = *s
		return latest
	}
	status.History = append(helmv2.Snapshots{s}, status.History...)
	return s
}

// cutHistory drops what the history holds before the revision a rollback
// would return to, as upstream does when it finds the release in sync and
// before a remediation: the history grows while a release fails, not
// forever. With RetryOnFailure, whose retries need no rollback target,
// the newest five are kept instead.
func cutHistory(req *Request) {
	if req.Object.GetActiveRetry(req.DefaultToRetryOnFailure) != nil {
		req.Object.Status.History.TruncateIgnoringPreviousSnapshots()
		return
	}
	req.Object.Status.History.Truncate(ignoreTestFailures(req))
}

// testHookStatuses lists the test hooks of rel with how their last run went.
func testHookStatuses(rel *releasev1.Release, filters []helmv2.Filter) map[string]*helmv2.TestHookStatus {
	hooks := map[string]*helmv2.TestHookStatus{}
	for _, h := range rel.Hooks {
		if !isTestHook(h) || !testSelected(h.Name, filters) {
			continue
		}
		hooks[h.Name] = &helmv2.TestHookStatus{
			LastStarted:   metaTime(h.LastRun.StartedAt),
			LastCompleted: metaTime(h.LastRun.CompletedAt),
			Phase:         string(h.LastRun.Phase),
		}
	}
	return hooks
}

// testSelected tells whether spec.test.filters run the test hook name, as
// Helm's test action selects them: an excluded name never; with any
// include filter, only the included names. Only those are recorded, as
// upstream records them: a skipped hook keeps the result of an earlier
// run, which must not speak for this one.
func testSelected(name string, filters []helmv2.Filter) bool {
	hasInclude, included := false, false
	for _, f := range filters {
		if f.Exclude {
			if f.Name == name {
				return false
			}
			continue
		}
		hasInclude = true
		included = included || f.Name == name
	}
	return !hasInclude || included
}

func isTestHook(h *releasev1.Hook) bool {
	for _, e := range h.Events {
		if e == releasev1.HookTest {
			return true
		}
	}
	return false
}
