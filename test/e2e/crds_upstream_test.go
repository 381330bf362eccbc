package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// crdOutcome is what a side did to the chart's CRD (crds/) over an
// install and an upgrade that changes the CRD, both without a crds
// policy in the spec.
type crdOutcome struct {
	afterInstall, afterUpgrade string
	labels                     string
}

// TestChartCRDsUpgradeAsUpstream: a chart whose crds/ CRD changes from one
// chart version to the next, installed and upgraded without a crds policy
// (the common case), under upstream's binary and ours, one after the
// other (the CRD is cluster-scoped). What each leaves of the CRD must be
// the same. Not parallel: TestCRDPolicies owns the same CRD.
func TestChartCRDsUpgradeAsUpstream(t *testing.T) {
	outcomes := map[string]crdOutcome{}
	for _, side := range []struct{ name, binary string }{
		{"upstream", framework.UpstreamBinary(t)},
		{"ours", ""},
	} {
		outcomes[side.name] = chartCRDsUpgrade(t, side.name, side.binary)
	}
	if outcomes["upstream"] != outcomes["ours"] {
		t.Errorf("the chart's CRD differs:\n  upstream %+v\n  ours     %+v", outcomes["upstream"], outcomes["ours"])
	} else {
		t.Logf("both: %+v", outcomes["ours"])
	}
}

func chartCRDsUpgrade(t *testing.T, side, binary string) crdOutcome {
	t.Helper()
	removeWidgetCRD(t)
	ns := env.Namespace(t)
	v1 := env.PublishChart(t, "e2e-crds-v1", "1.0.0", ns)
	v2Chart := env.PublishChart(t, "e2e-crds-v2", "2.0.0", ns)
	repo := env.HelmRepository(t, ns)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "crds-" + rand.String(8), Binary: binary})
	framework.EnsureRunning(t, ctl)
	hr := framework.Sharded(framework.Release(ns, "widgets", repo.Name, v1.Name, v1.Version, `{"widget":{"enabled":true}}`), ctl)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
	var out crdOutcome
	crd, err := getCRD(context.Background(), framework.WidgetCRD)
	out.afterInstall = crdState(crd, err)
	installed := crd.Generation

	env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.Chart.Spec.Version = v2Chart.Version })
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 2})
	crd, err = getCRD(context.Background(), framework.WidgetCRD)
	out.afterUpgrade = crdState(crd, err)
	if err == nil && crd.Generation != installed {
		out.afterUpgrade += ", changed"
	}
	out.labels = fmt.Sprintf("name=%t namespace=%t", crd.Labels["helm.toolkit.fluxcd.io/name"] != "", crd.Labels["helm.toolkit.fluxcd.io/namespace"] != "")
	t.Logf("%s: %+v", side, out)
	env.DeleteReleases(ns, nil, time.Minute)
	removeWidgetCRD(t)
	return out
}

// crdState names the schema version of the Widget CRD, or its absence.
func crdState(crd *apiextensionsv1.CustomResourceDefinition, err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return "absent"
	case err != nil:
		return "error: " + err.Error()
	case hasColor(crd):
		return "schema 2"
	}
	return "schema 1"
}

// removeWidgetCRD deletes the Widget CRD and waits until it is gone.
func removeWidgetCRD(t *testing.T) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: framework.WidgetCRD}}
	_ = env.Client.Delete(context.Background(), crd)
	env.Eventually(t, time.Minute, "the Widget CRD is gone", func(ctx context.Context) error {
		if _, err := getCRD(ctx, framework.WidgetCRD); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
}
