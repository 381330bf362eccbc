package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/testcharts"
)

// TestChartTemplateLifecycle installs podinfo from a chart template, checks
// an unchanged reconcile does nothing, upgrades on a values change and on a
// chart version change, and uninstalls on deletion.
func TestChartTemplateLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)

	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, `{"replicaCount": 1}`)
	created := time.Now()
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	t.Logf("podinfo Ready %s after the HelmRelease was created", time.Since(created).Round(100*time.Millisecond))

	if hr.Status.HelmChart != ns+"/"+ns+"-podinfo" {
		t.Errorf("status.helmChart = %q", hr.Status.HelmChart)
	}
	chart := &sourcev1.HelmChart{}
	if err := env.Get(ctx, chart, ns, ns+"-podinfo"); err != nil {
		t.Fatalf("HelmChart from the template: %v", err)
	}
	if chart.Spec.Chart != env.Podinfo.Name || chart.Spec.Version != env.Podinfo.Version || chart.Spec.SourceRef.Name != repo.Name {
		t.Errorf("HelmChart spec %+v does not follow the template", chart.Spec)
	}
	framework.WantHistory(t, hr, 1, env.Podinfo.Version)
	if hr.Status.StorageNamespace != ns || hr.Status.LastAttemptedRevision != env.Podinfo.Version ||
		hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionInstall {
		t.Errorf("status: storageNamespace %q lastAttemptedRevision %q lastAttemptedReleaseAction %q",
			hr.Status.StorageNamespace, hr.Status.LastAttemptedRevision, hr.Status.LastAttemptedReleaseAction)
	}
	env.WantDeploymentReplicas(t, ns, "podinfo", 1)
	env.WaitEvent(t, hr.Namespace, hr.Name, framework.EventWant{Reason: helmv2.InstallSucceededReason, Revision: true})
	framework.WantInventory(t, hr, ns+"_podinfo_apps_Deployment", ns+"_podinfo__Service")

	t.Run("unchanged reconcile does nothing", func(t *testing.T) {
		downloads := framework.Metric(t, env.Controller.MetricsURL(), "helm_controller_chart_downloads_total")
		env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), time.Minute)
		framework.WantHistory(t, hr, 1, env.Podinfo.Version)
		if got := len(env.Storage(t, ns, "podinfo")); got != 1 {
			t.Errorf("%d Helm revisions in storage, want 1", got)
		}
		if after := framework.Metric(t, env.Controller.MetricsURL(), "helm_controller_chart_downloads_total"); after != downloads {
			t.Errorf("chart downloads went from %v to %v on an unchanged reconcile", downloads, after)
		}
	})

	t.Run("upgrade on values change", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"replicaCount": 2}`) })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: 3 * time.Minute})
		framework.WantHistory(t, hr, 2, env.Podinfo.Version)
		env.WantDeploymentReplicas(t, ns, "podinfo", 2)
	})

	t.Run("upgrade on chart version change", func(t *testing.T) {
		next, err := env.Charts.AddChart(testcharts.Podinfo, chartserver.WithVersion(env.Podinfo.Version+"-next"+strings.ReplaceAll(ns, "-", "")))
		if err != nil {
			t.Fatal(err)
		}
		// Make source-controller fetch the new index now, not at its interval.
		env.RequestReconcile(t, repo)
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Chart.Spec.Version = next.Version })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 3, Timeout: 3 * time.Minute})
		framework.WantHistory(t, hr, 3, next.Version)
		if hr.Status.History[1].Status != "superseded" {
			t.Errorf("previous snapshot status %q, want superseded", hr.Status.History[1].Status)
		}
	})

	t.Run("uninstall on deletion", func(t *testing.T) {
		if err := env.Client.Delete(ctx, hr); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, 2*time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
		if got := len(env.Storage(t, ns, "podinfo")); got != 0 {
			t.Errorf("%d Helm revisions left in storage after uninstall", got)
		}
		env.Eventually(t, time.Minute, "HelmChart garbage collected", func(ctx context.Context) error { return env.Gone(ctx, chart) })
		env.Eventually(t, time.Minute, "Deployment removed", func(ctx context.Context) error {
			return env.Gone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo"}})
		})
	})
}

// TestOCIChartRef installs podinfo from an OCIRepository via chartRef.
func TestOCIChartRef(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.OCIRepository(t, ns, "podinfo", env.Podinfo.Name, env.Podinfo.Version)
	hr := &v2.HelmRelease{
		ObjectMeta: metav1.ObjectMeta{Name: "podinfo-oci", Namespace: ns},
		Spec: v2.HelmReleaseSpec{HelmReleaseSpec: helmv2.HelmReleaseSpec{
			Interval: metav1.Duration{Duration: 10 * time.Minute},
			ChartRef: &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: repo.Name},
		}},
	}
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatalf("creating HelmRelease: %v", err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	if err := env.Get(ctx, repo, ns, repo.Name); err != nil {
		t.Fatal(err)
	}
	// As upstream: the manifest digest pins the chart version, so a moved
	// tag upgrades the release.
	_, manifestDigest, _ := strings.Cut(repo.Status.Artifact.Revision, "@")
	wantVersion := env.Podinfo.Version + "+" + strings.TrimPrefix(manifestDigest, "sha256:")[:12]
	framework.WantHistory(t, hr, 1, wantVersion)
	if d := hr.Status.History[0].OCIDigest; d != manifestDigest {
		t.Errorf("snapshot ociDigest %q, want the manifest digest %q", d, manifestDigest)
	}
	if hr.Status.LastAttemptedRevision != wantVersion || hr.Status.LastAttemptedRevisionDigest != manifestDigest {
		t.Errorf("lastAttemptedRevision %q digest %q", hr.Status.LastAttemptedRevision, hr.Status.LastAttemptedRevisionDigest)
	}
	env.WantDeploymentReplicas(t, ns, "podinfo-oci", 1)
}

// TestValuesFromWatchedConfigMap: a change to a ConfigMap labelled for
// watching upgrades the HelmRelease that takes values from it, without
// waiting for the interval; an unlabelled one does not.
func TestValuesFromWatchedConfigMap(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	watched := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: ns, Labels: map[string]string{"reconcile.fluxcd.io/watch": "Enabled"}},
		Data:       map[string]string{"values.yaml": "replicaCount: 1\n"},
	}
	unwatched := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "unwatched", Namespace: ns},
		Data:       map[string]string{"values.yaml": "podAnnotations:\n  team: a\n"},
	}
	for _, cm := range []*corev1.ConfigMap{watched, unwatched} {
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
	hr.Spec.ValuesFrom = []meta.ValuesReference{
		{Kind: "ConfigMap", Name: "watched"},
		{Kind: "ConfigMap", Name: "unwatched"},
	}
	if err := env.Client.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 2 * time.Minute})

	// Unlabelled: nothing happens (the interval is ten minutes).
	unwatched.Data["values.yaml"] = "podAnnotations:\n  team: b\n"
	if err := env.Client.Update(ctx, unwatched); err != nil {
		t.Fatal(err)
	}
	env.Consistently(t, 5*time.Second, "an unwatched ConfigMap change is ignored", func(ctx context.Context) error {
		if n := len(env.Storage(t, ns, "podinfo")); n != 1 {
			return fmt.Errorf("%d revisions", n)
		}
		return nil
	})

	watched.Data["values.yaml"] = "replicaCount: 3\n"
	if err := env.Client.Update(ctx, watched); err != nil {
		t.Fatal(err)
	}
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2, Timeout: time.Minute})
	env.WantDeploymentReplicas(t, ns, "podinfo", 3)
}

// TestDependsOn: a HelmRelease waits for the HelmRelease it depends on and
// installs once that one is Ready.
func TestDependsOn(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	newHR := func(name string, dependsOn ...string) *v2.HelmRelease {
		hr := env.PodinfoRelease(ns, name, repo.Name, "")
		for _, d := range dependsOn {
			hr.Spec.DependsOn = append(hr.Spec.DependsOn, v2.DependencyReference{Name: d})
		}
		return hr
	}

	frontend := newHR("frontend", "backend")
	if err := env.Client.Create(ctx, frontend); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "frontend waits for backend", func(ctx context.Context) error {
		if err := env.Get(ctx, frontend, ns, frontend.Name); err != nil {
			return err
		}
		c := conditions.Get(frontend, meta.ReadyCondition)
		if c == nil || c.Reason != helmv2.DependencyNotReadyReason || !strings.Contains(c.Message, ns+"/backend") {
			return fmt.Errorf("Ready condition %+v", c)
		}
		return nil
	})
	if n := len(env.Storage(t, ns, "frontend")); n != 0 {
		t.Fatalf("frontend was released (%d revisions) before its dependency existed", n)
	}
	// As upstream: the chart template's HelmChart is made while the
	// release waits, so its chart is ready when the dependency is.
	if err := env.Get(ctx, &sourcev1.HelmChart{}, ns, ns+"-frontend"); err != nil || frontend.Status.HelmChart != ns+"/"+ns+"-frontend" {
		t.Errorf("HelmChart of the waiting frontend: %v, status.helmChart %q", err, frontend.Status.HelmChart)
	}
	if c := conditions.Get(frontend, meta.ReconcilingCondition); c == nil || c.Message != "Fulfilling prerequisites" {
		t.Errorf("Reconciling %+v while waiting, want upstream's \"Fulfilling prerequisites\"", c)
	}

	backend := newHR("backend")
	if err := env.Client.Create(ctx, backend); err != nil {
		t.Fatal(err)
	}
	env.WaitRelease(t, backend, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 2 * time.Minute})
	env.WaitRelease(t, frontend, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: time.Minute})
	if !frontend.Status.History.Latest().FirstDeployed.After(backend.Status.History.Latest().FirstDeployed.Time) &&
		!frontend.Status.History.Latest().FirstDeployed.Equal(&backend.Status.History.Latest().FirstDeployed) {
		t.Errorf("frontend deployed at %s, before backend at %s", frontend.Status.History.Latest().FirstDeployed, backend.Status.History.Latest().FirstDeployed)
	}
}

// TestDeleteSuspended: deleting a suspended HelmRelease leaves everything
// it made in place, as upstream does: the Helm release and the HelmChart of
// its chart template.
func TestDeleteSuspended(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 2 * time.Minute})
	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Suspend = true })
	if err := env.Client.Delete(ctx, hr); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
	if err := env.Get(ctx, &sourcev1.HelmChart{}, ns, ns+"-podinfo"); err != nil {
		t.Errorf("HelmChart of the suspended HelmRelease: %v (want it left in place)", err)
	}
	if n := len(env.Storage(t, ns, "podinfo")); n != 1 {
		t.Errorf("%d Helm revisions after deleting a suspended HelmRelease, want the release left in place", n)
	}
}
