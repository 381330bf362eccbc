package reconcile

import (
	"encoding/json"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/opencontainers/go-digest"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// releaseAPIVersion is recorded in snapshots: the Helm release format the
// snapshot describes.
const releaseAPIVersion = "helm.sh/v3"

// newSnapshot describes rel for status.history.
func newSnapshot(req *Request, rel *releasev1.Release, action helmv2.ReleaseAction) *helmv2.Snapshot {
	s := &helmv2.Snapshot{
		APIVersion:   releaseAPIVersion,
		Digest:       releaseDigest(rel).String(),
		Name:         rel.Name,
		Namespace:    rel.Namespace,
		Version:      rel.Version,
		Action:       action,
		ConfigDigest: req.ConfigDigest,
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

// releaseDigest identifies the content of a release: what it deployed and
// how it stands. It changes when anything but storage metadata changes.
func releaseDigest(rel *releasev1.Release) digest.Digest {
	type observed struct {
		Name      string         `json:"name"`
		Namespace string         `json:"namespace"`
		Version   int            `json:"version"`
		Status    string         `json:"status"`
		Chart     any            `json:"chart"`
		Config    map[string]any `json:"config"`
		Manifest  string         `json:"manifest"`
		Hooks     any            `json:"hooks"`
	}
	o := observed{Name: rel.Name, Namespace: rel.Namespace, Version: rel.Version, Config: rel.Config, Manifest: rel.Manifest, Hooks: rel.Hooks}
	if rel.Info != nil {
		o.Status = rel.Info.Status.String()
	}
	if rel.Chart != nil {
		o.Chart = rel.Chart.Metadata
	}
	data, err := json.Marshal(o)
	if err != nil {
		// Release content always encodes (Helm stores it as JSON); fall back
		// to identity fields rather than fail a reconcile over a digest.
		data = []byte(releaseID(rel))
	}
	return digest.Canonical.FromBytes(data)
}

// recordSnapshot puts a snapshot of rel at the head of the history, or
// replaces the head when it describes the same release version (a test
// run, an unlock), and keeps the history bounded.
func recordSnapshot(req *Request, rel *releasev1.Release, action helmv2.ReleaseAction) *helmv2.Snapshot {
	status := &req.Object.Status
	s := newSnapshot(req, rel, action)
	if latest := status.History.Latest(); latest != nil && latest.Targets(rel.Name, rel.Namespace, rel.Version) {
		// Keep what only the earlier snapshot knows: its action and tests.
		if s.Action == "" {
			s.Action = latest.Action
		}
		s.TestHooks = latest.TestHooks
		if s.ConfigDigest == "" {
			s.ConfigDigest = latest.ConfigDigest
		}
		*latest = *s
		return latest
	}
	status.History = append(helmv2.Snapshots{s}, status.History...)
	status.History.Truncate(ignoreTestFailures(req))
	return s
}

// testHookStatuses lists the test hooks of rel with how their last run went.
func testHookStatuses(rel *releasev1.Release) map[string]*helmv2.TestHookStatus {
	hooks := map[string]*helmv2.TestHookStatus{}
	for _, h := range rel.Hooks {
		if !isTestHook(h) {
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

func isTestHook(h *releasev1.Hook) bool {
	for _, e := range h.Events {
		if e == releasev1.HookTest {
			return true
		}
	}
	return false
}
