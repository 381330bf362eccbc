package e2e

import (
	"reflect"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestInventory checks status.inventory lists every object of the release
// in storage plus the chart's CRDs, in upstream's ID format
// (<namespace>_<name>_<group>_<kind>) and order (the manifest as Helm
// rendered it, then the CRDs), and follows upgrades that add and remove
// objects.
func TestInventory(t *testing.T) {
	ns := env.Namespace(t)
	// The chart's CRD goes when the test ends: TestCRDPolicies expects it
	// absent.
	env.CleanupWidgetCRD(t, ns)
	chart := env.PublishChart(t, "e2e-crds-v1", "1.0.0", ns)
	repo := env.HelmRepository(t, ns)

	const (
		crdID       = "_" + framework.WidgetCRD + "_apiextensions.k8s.io_CustomResourceDefinition"
		crdVersion  = "v1"
		widgetGroup = "e2e.afterhooks.io"
	)
	configMapID := ns + "_inv-settings__ConfigMap"
	widgetID := ns + "_inv_" + widgetGroup + "_Widget"

	hr := framework.Release(ns, "inv", repo.Name, chart.Name, chart.Version, "")
	hr.Spec.Install = &v2.Install{Install: helmv2.Install{CRDs: helmv2.Create}}
	hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{CRDs: helmv2.CreateReplace}}
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
	wantExactInventory(t, hr, []helmv2.ResourceRef{{ID: configMapID, Version: "v1"}, {ID: crdID, Version: crdVersion}})

	framework.Step(t, "upgrade adds an object", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"widget":{"enabled":true}}`) })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
		wantExactInventory(t, hr, []helmv2.ResourceRef{
			{ID: configMapID, Version: "v1"}, {ID: widgetID, Version: "v1"}, {ID: crdID, Version: crdVersion}})
	})

	framework.Step(t, "upgrade removes an object", func(t *testing.T) {
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSON(`{"widget":{"enabled":false}}`) })
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 3})
		wantExactInventory(t, hr, []helmv2.ResourceRef{{ID: configMapID, Version: "v1"}, {ID: crdID, Version: crdVersion}})
	})
}

// wantExactInventory checks status.inventory is exactly want, in order.
func wantExactInventory(t *testing.T, hr *v2.HelmRelease, want []helmv2.ResourceRef) {
	t.Helper()
	if hr.Status.Inventory == nil {
		t.Fatalf("status.inventory is empty, want %v", want)
	}
	if got := hr.Status.Inventory.Entries; !reflect.DeepEqual(got, want) {
		t.Fatalf("status.inventory\n got  %v\n want %v", got, want)
	}
}
