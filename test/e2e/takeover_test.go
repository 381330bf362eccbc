package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/opencontainers/go-digest"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
)

// TestTakeoverFromUpstream hands over a release that upstream
// helm-controller installed: the Helm release is in storage and the
// HelmRelease status is written in upstream's format. Our controller must
// adopt it as in sync, without a new Helm revision.
func TestTakeoverFromUpstream(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	repo := createHelmRepository(t, ns)
	values := map[string]any{"replicaCount": 1}

	hr := podinfoRelease(ns, "podinfo", repo)
	hr.Spec.Suspend = true // until the "upstream" status is in place
	hr.Spec.Values = jsonValues(t, `{"replicaCount": 1}`)

	// The release, as a previous controller left it in Helm storage.
	chart, err := loader.Load(sharedCharts + "/podinfo")
	if err != nil {
		t.Fatal(err)
	}
	factory, err := action.NewConfigFactoryFromRESTConfig(env.cluster.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := factory.Build(ns, ns)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := action.Install(ctx, cfg, hr, chart, values, action.Options{})
	if err != nil {
		t.Fatalf("installing the release to take over: %v", err)
	}

	if err := env.client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	// The controller adds its finalizer meanwhile; retry on conflicts.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := get(ctx, hr, ns, hr.Name); err != nil {
			return err
		}
		return writeUpstreamStatus(hr, rel)
	})
	if err != nil {
		t.Fatalf("writing the upstream status: %v", err)
	}

	setSuspend(t, hr, false)
	waitReady(t, hr, helmv2.InstallSucceededReason, 2*time.Minute)
	consistently(t, 5*time.Second, "no new Helm revision after the takeover", func(ctx context.Context) error {
		if n := releaseRevisions(t, ns, "podinfo"); n != 1 {
			return fmt.Errorf("%d Helm revisions in storage, want 1", n)
		}
		return nil
	})
	if err := get(ctx, hr, ns, hr.Name); err != nil {
		t.Fatal(err)
	}
	if len(hr.Status.History) != 1 || hr.Status.History[0].Version != 1 {
		t.Fatalf("history after takeover: %+v", hr.Status.History)
	}
}

// writeUpstreamStatus writes the status upstream helm-controller v1.6 has
// after a successful install: a snapshot of the release, the attempt
// bookkeeping and the conditions.
func writeUpstreamStatus(hr *v2.HelmRelease, rel *releasev1.Release) error {
	configDigest := chartutil.DigestValues(digest.Canonical, rel.Config).String()
	snapshot := &helmv2.Snapshot{
		Digest:        upstreamReleaseDigest(rel),
		Name:          rel.Name,
		Namespace:     rel.Namespace,
		Version:       rel.Version,
		Status:        rel.Info.Status.String(),
		Action:        helmv2.ReleaseActionInstall,
		ChartName:     rel.Chart.Metadata.Name,
		ChartVersion:  rel.Chart.Metadata.Version,
		AppVersion:    rel.Chart.Metadata.AppVersion,
		ConfigDigest:  configDigest,
		FirstDeployed: metav1.NewTime(rel.Info.FirstDeployed),
		LastDeployed:  metav1.NewTime(rel.Info.LastDeployed),
	}
	msg := fmt.Sprintf("Helm install succeeded for release %s/%s.v%d with chart %s@%s",
		rel.Namespace, rel.Name, rel.Version, snapshot.ChartName, snapshot.ChartVersion)
	now := metav1.Now()
	hr.Status = helmv2.HelmReleaseStatus{
		ObservedGeneration:         hr.Generation,
		LastAttemptedGeneration:    hr.Generation,
		LastAttemptedRevision:      snapshot.ChartVersion,
		LastAttemptedConfigDigest:  configDigest,
		LastAttemptedReleaseAction: helmv2.ReleaseActionInstall,
		StorageNamespace:           hr.Namespace,
		HelmChart:                  hr.Namespace + "/" + hr.Namespace + "-" + hr.Name,
		History:                    helmv2.Snapshots{snapshot},
		Conditions: []metav1.Condition{
			{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: helmv2.InstallSucceededReason, Message: msg, LastTransitionTime: now, ObservedGeneration: hr.Generation},
			{Type: helmv2.ReleasedCondition, Status: metav1.ConditionTrue, Reason: helmv2.InstallSucceededReason, Message: msg, LastTransitionTime: now, ObservedGeneration: hr.Generation},
		},
	}
	return env.client.Status().Update(context.Background(), hr)
}

// upstreamReleaseDigest computes a snapshot digest the way upstream
// documents it: the JSON encoding of the release without chart files and
// without test hooks.
func upstreamReleaseDigest(rel *releasev1.Release) string {
	type observation struct {
		Name          string           `json:"name"`
		Version       int              `json:"version"`
		Info          releasev1.Info   `json:"info"`
		ChartMetadata chartv2.Metadata `json:"chartMetadata"`
		Config        map[string]any   `json:"config"`
		Manifest      string           `json:"manifest"`
		Hooks         []releasev1.Hook `json:"hooks"`
		Namespace     string           `json:"namespace"`
	}
	o := observation{Name: rel.Name, Version: rel.Version, Info: *rel.Info, ChartMetadata: *rel.Chart.Metadata,
		Config: rel.Config, Manifest: rel.Manifest, Namespace: rel.Namespace}
	for _, h := range rel.Hooks {
		if !isTestHook(h) {
			o.Hooks = append(o.Hooks, *h)
		}
	}
	d := digest.Canonical.Digester()
	if err := json.NewEncoder(d.Hash()).Encode(o); err != nil {
		panic(err) // a Helm release always encodes
	}
	return d.Digest().String()
}

func isTestHook(h *releasev1.Hook) bool {
	for _, e := range h.Events {
		if e == releasev1.HookTest {
			return true
		}
	}
	return false
}
