package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestChartRenameWhileFailedAsUpstream: the chart of a release whose last
// upgrade failed is renamed (chartNameChangeStrategy Reinstall, the
// default). Upstream checks the release target before anything else: the
// failed release is uninstalled and the new chart installed afresh. Ours
// must do the same, not upgrade the failed release in place.
func TestChartRenameWhileFailedAsUpstream(t *testing.T) {
	t.Parallel()
	outcome := map[string]string{}
	for _, side := range []struct{ name, binary string }{
		{"upstream", framework.UpstreamBinary(t)},
		{"ours", ""},
	} {
		ns := env.Namespace(t)
		other := env.PublishChart(t, "e2e-tests", "0.1.0", ns)
		repo := env.HelmRepository(t, ns)
		ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "rename-" + rand.String(8), Binary: side.binary})
		framework.EnsureRunning(t, ctl)
		hr := framework.Sharded(env.PodinfoRelease(ns, "renamed", repo.Name, ""), ctl)
		hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Timeout: &metav1.Duration{Duration: 15 * time.Second}}}
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.Values = framework.JSON(`{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`)
		})
		env.WaitNotReady(t, hr, helmv2.UpgradeFailedReason, "")
		env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
			hr.Spec.Values = nil
			hr.Spec.Chart.Spec.Chart, hr.Spec.Chart.Spec.Version = other.Name, other.Version
		})
		env.WaitRelease(t, hr, framework.ReleaseWant{Timeout: 2 * time.Minute})
		var versions []string
		for _, s := range env.Storage(t, ns, hr.Status.History.Latest().Name) {
			versions = append(versions, fmt.Sprintf("v%d %s %s", s.Release.Version, s.Release.Chart.Metadata.Name, s.Status()))
		}
		// Each side publishes the chart with its own version suffix: the
		// chart's name is compared, not its version.
		var history []string
		for _, s := range hr.Status.History {
			history = append(history, fmt.Sprintf("v%d %s (%s) %s", s.Version, s.Status, s.Action, s.ChartName))
		}
		outcome[side.name] = fmt.Sprintf("Ready %s; history [%s]; storage [%s]",
			conditions.GetReason(hr, meta.ReadyCondition), strings.Join(history, ", "), strings.Join(versions, ", "))
		t.Logf("%s: %s", side.name, outcome[side.name])
	}
	if outcome["upstream"] != outcome["ours"] {
		t.Errorf("after the rename:\nupstream %s\nours     %s", outcome["upstream"], outcome["ours"])
	}
}
