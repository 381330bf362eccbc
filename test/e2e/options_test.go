package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestUninstallKeepHistory deletes a HelmRelease with uninstall.keepHistory:
// the workload goes, the Helm storage stays, marked uninstalled.
func TestUninstallKeepHistory(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
	hr.Spec.Uninstall = &v2.Uninstall{Uninstall: helmv2.Uninstall{KeepHistory: true, Timeout: &metav1.Duration{Duration: 30 * time.Second}}}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})

	if err := env.Client.Delete(context.Background(), hr); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
	env.Eventually(t, 30*time.Second, "Deployment removed", func(ctx context.Context) error {
		return env.Gone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo"}})
	})
	stored := env.Storage(t, ns, "podinfo")
	if len(stored) != 1 {
		t.Fatalf("Helm storage after an uninstall keeping history: %s, want the one revision", framework.Describe(stored))
	}
	s := stored[0]
	if got := s.Secret.Labels["status"]; got != "uninstalled" {
		t.Errorf("storage Secret %s has label status=%q, want uninstalled", s.Secret.Name, got)
	}
	if s.Release.Info == nil || s.Release.Info.Status != "uninstalled" || s.Release.Info.Deleted.IsZero() {
		t.Errorf("stored release info %+v, want uninstalled with a deletion time", s.Release.Info)
	}
}

// TestTargetAndStorageNamespace installs into a namespace Helm creates and
// keeps the Helm storage in a third namespace.
func TestTargetAndStorageNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	storageNS := env.Namespace(t)
	targetNS := "e2e-target-" + rand.String(6)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targetNS}})
	})
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
	hr.Spec.TargetNamespace = targetNS
	hr.Spec.StorageNamespace = storageNS
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{CreateNamespace: true, Timeout: &metav1.Duration{Duration: 30 * time.Second}}}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})

	release := targetNS + "-podinfo"
	if hr.Status.StorageNamespace != storageNS {
		t.Errorf("status.storageNamespace %q, want %q", hr.Status.StorageNamespace, storageNS)
	}
	latest := hr.Status.History.Latest()
	if latest.Name != release || latest.Namespace != targetNS {
		t.Errorf("latest snapshot is %s/%s, want %s/%s", latest.Namespace, latest.Name, targetNS, release)
	}
	if err := env.Get(ctx, &corev1.Namespace{}, "", targetNS); err != nil {
		t.Fatalf("target namespace not created: %v", err)
	}
	// podinfo names its objects after the release when the name contains "podinfo".
	env.WantDeploymentReplicas(t, targetNS, release, 1)
	var deployments appsv1.DeploymentList
	if err := env.Client.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 0 {
		t.Errorf("%d Deployments in the HelmRelease's namespace, want them all in %s", len(deployments.Items), targetNS)
	}
	if stored := env.Storage(t, storageNS, release); len(stored) != 1 || stored[0].Release.Namespace != targetNS {
		t.Errorf("storage namespace holds %s, want one release of namespace %s", framework.Describe(stored), targetNS)
	}
	for _, other := range []string{ns, targetNS} {
		if n := len(env.Storage(t, other, release)); n != 0 {
			t.Errorf("%d Helm storage Secrets in %s, want them only in %s", n, other, storageNS)
		}
	}

	t.Run("uninstall-uses-storage-namespace", func(t *testing.T) {
		if err := env.Client.Delete(ctx, hr); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
		if n := len(env.Storage(t, storageNS, release)); n != 0 {
			t.Errorf("%d Helm storage Secrets left in %s after the uninstall", n, storageNS)
		}
		env.Eventually(t, 30*time.Second, "Deployment removed from the target namespace", func(ctx context.Context) error {
			return env.Gone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: targetNS, Name: release}})
		})
	})
}

// TestLongReleaseName installs a HelmRelease whose name is too long for a
// Helm release: the release name is shortened to 53 characters.
func TestLongReleaseName(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	// Over Helm's 53 characters, but within the 63 a label value (the
	// HelmChart's helm.toolkit.fluxcd.io/name) allows.
	name := "a-helmrelease-name-longer-than-helm-release-names-may-be"
	if len(name) <= 53 || len(name) > 63 {
		t.Fatalf("test name %q has %d characters, want 54 to 63", name, len(name))
	}
	sum := sha256.Sum256([]byte(name))
	want := name[:40] + "-" + hex.EncodeToString(sum[:])[:12]

	hr := env.PodinfoRelease(ns, name, repo.Name, "")
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})

	latest := hr.Status.History.Latest()
	if latest.Name != want || len(latest.Name) != 53 {
		t.Errorf("snapshot release name %q (%d characters), want %q", latest.Name, len(latest.Name), want)
	}
	if !strings.Contains(conditions.GetMessage(hr, meta.ReadyCondition), want) {
		t.Errorf("Ready message %q does not name the release %s", conditions.GetMessage(hr, meta.ReadyCondition), want)
	}
	stored := env.Storage(t, ns, want)
	if len(stored) != 1 || stored[0].Secret.Name != "sh.helm.release.v1."+want+".v1" || stored[0].Release.Info.Status != "deployed" {
		t.Fatalf("Helm storage of %s: %s", want, framework.Describe(stored))
	}
	var deployments appsv1.DeploymentList
	if err := env.Client.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 || !strings.HasPrefix(deployments.Items[0].Name, want) {
		t.Fatalf("Deployments %v, want one named after release %s", deploymentNames(deployments), want)
	}
	if d := deployments.Items[0]; d.Status.ReadyReplicas != 1 {
		t.Errorf("Deployment %s has %d ready replicas", d.Name, d.Status.ReadyReplicas)
	}

	t.Run("uninstall-finds-shortened-release", func(t *testing.T) {
		if err := env.Client.Delete(ctx, hr); err != nil {
			t.Fatal(err)
		}
		env.Eventually(t, time.Minute, "HelmRelease gone", func(ctx context.Context) error { return env.Gone(ctx, hr) })
		if n := len(env.Storage(t, ns, want)); n != 0 {
			t.Errorf("%d Helm revisions of %s left after the uninstall", n, want)
		}
	})
}

// deploymentNames lists the names of the Deployments.
func deploymentNames(list appsv1.DeploymentList) []string {
	var out []string
	for _, d := range list.Items {
		out = append(out, d.Name)
	}
	return out
}

// TestCRDPolicies installs and upgrades a chart with a CRD in crds/ under
// the Skip, Create and CreateReplace policies.
func TestCRDPolicies(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	env.CleanupWidgetCRD(t, ns)
	v1 := env.PublishChart(t, "e2e-crds-v1", "1.0.0", ns)
	v2Skip := env.PublishChart(t, "e2e-crds-v2", "2.0.0", ns)
	v2Create := env.PublishChart(t, "e2e-crds-v2", "2.0.1", ns)
	v2Replace := env.PublishChart(t, "e2e-crds-v2", "2.0.2", ns)
	repo := env.HelmRepository(t, ns)

	managed := framework.Release(ns, "managed", repo.Name, v1.Name, v1.Version, `{"widget":{"enabled":true}}`)
	managed.Spec.Install = &v2.Install{Install: helmv2.Install{CRDs: helmv2.Create}}

	var installedGeneration int64
	framework.Step(t, "install-skip", func(t *testing.T) {
		hr := framework.Release(ns, "skipped", repo.Name, v1.Name, v1.Version, "")
		hr.Spec.Install = &v2.Install{Install: helmv2.Install{CRDs: helmv2.Skip}}
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		if _, err := getCRD(context.Background(), framework.WidgetCRD); !apierrors.IsNotFound(err) {
			t.Fatalf("CRD %s after an install with crds Skip: %v, want not found", framework.WidgetCRD, err)
		}
	})

	framework.Step(t, "install-create", func(t *testing.T) {
		env.Create(t, managed)
		env.WaitRelease(t, managed, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		crd, err := getCRD(context.Background(), framework.WidgetCRD)
		if err != nil {
			t.Fatalf("CRD not created by an install with crds Create: %v", err)
		}
		if hasColor(crd) {
			t.Errorf("CRD already has version 2 of the schema")
		}
		installedGeneration = crd.Generation
		// The chart's Widget needed the CRD in the same install.
		widget := &unstructured.Unstructured{}
		widget.SetGroupVersionKind(schema.GroupVersionKind{Group: "e2e.afterhooks.io", Version: "v1", Kind: "Widget"})
		if err := env.Get(context.Background(), widget, ns, "managed"); err != nil {
			t.Errorf("Widget from the chart: %v", err)
		}
	})

	upgrades := []struct {
		name         string
		chart        chartserver.ChartRef
		policy       helmv2.CRDsPolicy
		revision     int
		wantReplaced bool
	}{
		{"upgrade-skip", v2Skip, helmv2.Skip, 2, false},
		// Server-side (Helm 4's default), Create applies the chart's CRD
		// over the existing one, as upstream's Create does.
		{"upgrade-create-applies", v2Create, helmv2.Create, 3, true},
		{"upgrade-create-replace", v2Replace, helmv2.CreateReplace, 4, true},
	}
	for _, u := range upgrades {
		framework.Step(t, u.name, func(t *testing.T) {
			env.PatchSpec(t, managed, func(hr *v2.HelmRelease) {
				hr.Spec.Chart.Spec.Version = u.chart.Version
				hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CRDs: u.policy}}
			})
			env.WaitRelease(t, managed, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: u.revision})
			framework.WantHistory(t, managed, u.revision, u.chart.Version)
			crd, err := getCRD(context.Background(), framework.WidgetCRD)
			if err != nil {
				t.Fatalf("CRD after the upgrade: %v", err)
			}
			if u.wantReplaced {
				if !hasColor(crd) {
					t.Errorf("CRD schema not updated by an upgrade with crds %s", u.policy)
				}
				if cols := crd.Spec.Versions[0].AdditionalPrinterColumns; len(cols) != 1 || cols[0].Name != "Color" {
					t.Errorf("CRD printer columns %+v, want the Color column of version 2", cols)
				}
				return
			}
			if hasColor(crd) || crd.Generation != installedGeneration {
				t.Errorf("CRD changed by an upgrade with crds %s (generation %d, was %d)", u.policy, crd.Generation, installedGeneration)
			}
		})
	}
}

// getCRD reads the CustomResourceDefinition name.
func getCRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	return crd, env.Get(ctx, crd, "", name)
}

// hasColor tells whether the CRD has version 2 of the Widget schema.
func hasColor(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		if _, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["color"]; ok {
			return true
		}
	}
	return false
}

// TestBadInput covers input errors: values that cannot be composed, charts
// that do not render and values a chart's schema rejects.
func TestBadInput(t *testing.T) {
	t.Parallel()

	t.Run("missing-values-secret", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
		hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "Secret", Name: "missing-values"}}
		env.Create(t, hr)
		env.Eventually(t, time.Minute, "values failure reported", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, "ValuesError"); err != nil {
				return err
			}
			if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "missing-values") {
				return fmt.Errorf("Ready message %q does not name the Secret", msg)
			}
			return nil
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: "ValuesError",
			Contains: "missing-values",
		})
		env.Consistently(t, 2*time.Second, "no Helm release without values", func(ctx context.Context) error {
			if n := len(env.Storage(t, ns, "podinfo")); n != 0 {
				return fmt.Errorf("%d Helm revisions although the values could not be composed", n)
			}
			return nil
		})
		if len(hr.Status.History) != 0 {
			t.Errorf("history %s, want none", framework.Snapshots(hr.Status.History))
		}
	})

	t.Run("optional-missing-key", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		if err := env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "partial-values", Namespace: ns},
			StringData: map[string]string{"other.yaml": "replicaCount: 5\n"},
		}); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "replicas", Namespace: ns},
			Data:       map[string]string{"values.yaml": "replicaCount: 2\n"},
		}); err != nil {
			t.Fatal(err)
		}
		hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
		hr.Spec.ValuesFrom = []helmv2.ValuesReference{
			{Kind: "ConfigMap", Name: "replicas"},
			{Kind: "Secret", Name: "partial-values", ValuesKey: "values.yaml", Optional: true},
		}
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		env.WantDeploymentReplicas(t, ns, "podinfo", 2)
	})

	t.Run("render-failure-on-install", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		broken := env.PublishChart(t, "e2e-broken", "0.2.0", ns, chartserver.WithValues(map[string]any{"broken": true}))
		repo := env.HelmRepository(t, ns)
		hr := framework.Release(ns, "app", repo.Name, broken.Name, broken.Version, "")
		env.Create(t, hr)
		env.Eventually(t, time.Minute, "render failure reported", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "broken on purpose") {
				return fmt.Errorf("Ready message %q does not carry the template error", msg)
			}
			return nil
		})
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{
			Type: corev1.EventTypeWarning, Reason: helmv2.InstallFailedReason,
			Contains: "broken on purpose",
		})
		if n := len(env.Storage(t, ns, "app")); n != 0 {
			t.Errorf("%d Helm revisions stored for a chart that does not render", n)
		}
		// Helm hands back the release it failed to render, but never stores
		// it: the history only describes releases Helm stored.
		env.Eventually(t, 10*time.Second, "status written", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.LastAttemptedReleaseAction != helmv2.ReleaseActionInstall {
				return fmt.Errorf("lastAttemptedReleaseAction %q", hr.Status.LastAttemptedReleaseAction)
			}
			return nil
		})
		if len(hr.Status.History) != 0 {
			t.Errorf("history %s for a release Helm never stored (storage is empty)", framework.Snapshots(hr.Status.History))
		}
	})

	t.Run("render-failure-on-upgrade", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		ns := env.Namespace(t)
		good := env.PublishChart(t, "e2e-broken", "0.1.0", ns)
		broken := env.PublishChart(t, "e2e-broken", "0.2.0", ns, chartserver.WithValues(map[string]any{"broken": true}))
		repo := env.HelmRepository(t, ns)
		hr := framework.Release(ns, "app", repo.Name, good.Name, good.Version, "")
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		env.WantDeploymentReplicas(t, ns, "app", 1)
		before := &appsv1.Deployment{}
		if err := env.Get(ctx, before, ns, "app"); err != nil {
			t.Fatal(err)
		}

		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Chart.Spec.Version = broken.Version })
		env.Eventually(t, time.Minute, "render failure of the upgrade reported", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if hr.Status.LastAttemptedRevision != broken.Version {
				return fmt.Errorf("lastAttemptedRevision %q, want %q", hr.Status.LastAttemptedRevision, broken.Version)
			}
			if err := framework.Condition(hr, helmv2.ReleasedCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, ""); err != nil {
				return err
			}
			if msg := conditions.GetMessage(hr, meta.ReadyCondition); !strings.Contains(msg, "broken on purpose") {
				return fmt.Errorf("Ready message %q does not carry the template error", msg)
			}
			return nil
		})
		if len(hr.Status.History) != 1 {
			t.Errorf("history %s, want only the installed release", framework.Snapshots(hr.Status.History))
		}
		framework.WantHistory(t, hr, 1, good.Version)
		stored := env.Storage(t, ns, "app")
		if len(stored) != 1 || stored[0].Release.Info.Status != "deployed" || stored[0].Release.Chart.Metadata.Version != good.Version {
			t.Fatalf("Helm storage %s, want only v1 of %s deployed", framework.Describe(stored), good.Version)
		}
		after := &appsv1.Deployment{}
		if err := env.Get(ctx, after, ns, "app"); err != nil {
			t.Fatalf("Deployment of the installed release: %v", err)
		}
		if after.Generation != before.Generation || after.Status.ReadyReplicas != 1 {
			t.Errorf("Deployment generation %d (was %d), ready %d: the failed upgrade touched it",
				after.Generation, before.Generation, after.Status.ReadyReplicas)
		}
	})

	t.Run("values-rejected-by-schema", func(t *testing.T) {
		t.Parallel()
		ns := env.Namespace(t)
		chart := env.PublishChart(t, "e2e-broken", "0.1.0", ns)
		repo := env.HelmRepository(t, ns)
		hr := framework.Release(ns, "app", repo.Name, chart.Name, chart.Version, `{"replicaCount":"two"}`)
		env.Create(t, hr)
		env.Eventually(t, time.Minute, "schema violation reported", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			if err := framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.InstallFailedReason); err != nil {
				return err
			}
			msg := conditions.GetMessage(hr, meta.ReadyCondition)
			if !strings.Contains(msg, "replicaCount") || !strings.Contains(msg, "schema") {
				return fmt.Errorf("Ready message %q does not name the offending value and the schema", msg)
			}
			return nil
		})
		t.Logf("Ready message: %s", conditions.GetMessage(hr, meta.ReadyCondition))
		if n := len(env.Storage(t, ns, "app")); n != 0 {
			t.Errorf("%d Helm revisions stored for values the chart rejects", n)
		}
		if err := env.Get(context.Background(), &appsv1.Deployment{}, ns, "app"); !apierrors.IsNotFound(err) {
			t.Errorf("Deployment for rejected values: %v, want not found", err)
		}
	})
}

// TestReleaseTargetChange changes spec.releaseName and then
// spec.storageNamespace of an installed HelmRelease: each time the release
// the status records is uninstalled before a new one is installed at the
// new target, so nothing is left behind.
func TestReleaseTargetChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	storageNS := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "podinfo", repo.Name, "")
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.ReleaseName = "podinfo-renamed" })
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	if latest := hr.Status.History.Latest(); latest.Name != "podinfo-renamed" || len(hr.Status.History) != 1 {
		t.Errorf("history %s, want only podinfo-renamed.v1", framework.Snapshots(hr.Status.History))
	}
	if n := len(env.Storage(t, ns, "podinfo")); n != 0 {
		t.Errorf("%d Helm storage Secrets of the old release name left", n)
	}
	env.Eventually(t, 30*time.Second, "old release's Deployment removed", func(ctx context.Context) error {
		return env.Gone(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "podinfo"}})
	})
	env.WantDeploymentReplicas(t, ns, "podinfo-renamed", 1)
	env.WaitEvent(t, ns, hr.Name, framework.EventWant{
		Type: corev1.EventTypeNormal, Reason: helmv2.UninstallSucceededReason,
		Contains: "podinfo",
	})

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.StorageNamespace = storageNS })
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	if hr.Status.StorageNamespace != storageNS {
		t.Errorf("status.storageNamespace %q, want %q", hr.Status.StorageNamespace, storageNS)
	}
	if n := len(env.Storage(t, ns, "podinfo-renamed")); n != 0 {
		t.Errorf("%d Helm storage Secrets left in the old storage namespace", n)
	}
	if n := len(env.Storage(t, storageNS, "podinfo-renamed")); n != 1 {
		t.Errorf("%d Helm storage Secrets in the new storage namespace, want 1", n)
	}
	if err := env.Get(ctx, &appsv1.Deployment{}, ns, "podinfo-renamed"); err != nil {
		t.Errorf("Deployment of the reinstalled release: %v", err)
	}
}
