package e2e

import (
	"context"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestTargetNamespaceChangeAsUpstream: a release whose chart leaves
// metadata.namespace to Helm moves to another targetNamespace (which
// renames the release too). Both controllers uninstall the old release and
// install the new one. Upstream uninstalls with the new namespace as Helm's
// default, so the old objects are looked for there and stay where they are
// (fluxcd/flux2#1005, #2673). Ours must keep them too: deleting them would
// remove what upstream keeps.
func TestTargetNamespaceChangeAsUpstream(t *testing.T) {
	t.Parallel()
	left := map[string]bool{}
	for _, side := range []struct{ name, binary string }{
		{"upstream", framework.UpstreamBinary(t)},
		{"ours", ""},
	} {
		ns, from, to := env.Namespace(t), env.Namespace(t), env.Namespace(t)
		chart := env.PublishChart(t, "e2e-tests", "0.1.0", ns)
		repo := env.HelmRepository(t, ns)
		ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "target-" + rand.String(8), Binary: side.binary})
		framework.EnsureRunning(t, ctl)
		hr := framework.Sharded(framework.Release(ns, "moved", repo.Name, chart.Name, chart.Version, ""), ctl)
		hr.Spec.TargetNamespace = from
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) { hr.Spec.TargetNamespace = to })
		env.Eventually(t, 2*time.Minute, side.name+": installed in the new namespace", func(ctx context.Context) error {
			return env.Get(ctx, &corev1.ConfigMap{}, to, to+"-moved-settings")
		})
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		err := env.Get(context.Background(), &corev1.ConfigMap{}, from, from+"-moved-settings")
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		left[side.name] = err == nil
		if old := env.Storage(t, ns, from+"-moved"); len(old) != 0 {
			t.Errorf("%s: %d release records of the old release left in %s, want none", side.name, len(old), ns)
		}
		t.Logf("%s: the old release's ConfigMap left in the old namespace: %t", side.name, left[side.name])
	}
	if !left["upstream"] || !left["ours"] {
		t.Errorf("old release's ConfigMap left: upstream %t, ours %t; want both to leave it", left["upstream"], left["ours"])
	}
}
