package e2e

import (
	"context"
	"fmt"
	"os/exec"
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

// TestChangesByHandAreUpgradedOverAsUpstream: revisions made by hand with
// the helm CLI, which write what the controller's own would (the same
// chart and values; "Rollback to N" after a failed upgrade), are releases
// the HelmRelease did not make. Upstream upgrades over both on the next
// reconcile; ours must too, not take them for its own revisions left
// unrecorded by a restart (issue 44, items 5 and 6).
//
//  1. helm upgrade --reuse-values --wait=false of the release in sync: the
//     next reconcile upgrades (v3), UpgradeSucceeded;
//  2. an upgrade that fails (stalled, default remediation), then helm
//     rollback to the last good revision: the next reconcile upgrades
//     again (v6), which fails again, UpgradeFailed; nothing is
//     remediated.
func TestChangesByHandAreUpgradedOverAsUpstream(t *testing.T) {
	t.Parallel()
	outcome := map[string]string{}
	for _, side := range []struct{ name, binary string }{
		{"upstream", framework.UpstreamBinary(t)},
		{"ours", ""},
	} {
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "byhand-" + rand.String(8), Binary: side.binary})
		framework.EnsureRunning(t, ctl)
		hr := framework.Sharded(env.PodinfoRelease(ns, "byhand", repo.Name, `{"replicaCount":1}`), ctl)
		hr.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{Timeout: &metav1.Duration{Duration: 15 * time.Second}}}
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
		helm, chart := helmCLI(t, ns, repo.Spec.URL)

		framework.Step(t, side.name+": helm upgrade by hand, same chart and values", func(t *testing.T) {
			helm(t, "upgrade", hr.Name, chart, "--reuse-values", "--wait=false", "--force-conflicts")
			env.WantStorage(t, ns, hr.Name, "superseded", "deployed")
			env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.UpgradeSucceededReason, Version: 3})
			outcome[side.name] = describeOutcome(t, hr, ns)
		})
		framework.Step(t, side.name+": helm rollback by hand of a failed upgrade", func(t *testing.T) {
			env.PatchSpec(t, hr, func(hr *v2.HelmRelease) {
				hr.Spec.Values = framework.JSON(`{"replicaCount":1,"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`)
			})
			env.WaitNotReady(t, hr, helmv2.UpgradeFailedReason, "")
			helm(t, "rollback", hr.Name, "3", "--force-conflicts")
			env.WantStorage(t, ns, hr.Name, "superseded", "superseded", "superseded", "failed", "deployed")
			env.WaitReconcileHandled(t, hr, env.RequestReconcile(t, hr), 2*time.Minute)
			env.Eventually(t, 2*time.Minute, "the upgrade over the rollback made by hand, failed", func(ctx context.Context) error {
				if err := env.Get(ctx, hr, hr.Namespace, hr.Name); err != nil {
					return err
				}
				if latest := hr.Status.History.Latest(); latest == nil || latest.Version != 6 {
					return fmt.Errorf("history %s, want revision 6 at its head", framework.Snapshots(hr.Status.History))
				}
				return framework.Condition(hr, meta.ReadyCondition, metav1.ConditionFalse, helmv2.UpgradeFailedReason)
			})
			if c := conditions.Get(hr, helmv2.RemediatedCondition); c != nil {
				t.Errorf("%s: Remediated %s/%s (%s): nothing was remediated", side.name, c.Status, c.Reason, c.Message)
			}
			outcome[side.name] += "; then " + describeOutcome(t, hr, ns)
		})
	}
	if outcome["ours"] != outcome["upstream"] {
		t.Errorf("changes by hand end differently:\n  upstream: %s\n  ours:     %s", outcome["upstream"], outcome["ours"])
	}
}

// describeOutcome is what a user sees of hr and its release: Ready, the
// history and Helm storage, without digests or times.
func describeOutcome(t *testing.T, hr *v2.HelmRelease, ns string) string {
	t.Helper()
	var history, stored []string
	for _, s := range hr.Status.History {
		history = append(history, fmt.Sprintf("v%d %s (%s)", s.Version, s.Status, s.Action))
	}
	for _, s := range env.Storage(t, ns, hr.Status.History.Latest().Name) {
		stored = append(stored, fmt.Sprintf("v%d %s", s.Release.Version, s.Status()))
	}
	return fmt.Sprintf("Ready %s; history [%s]; storage [%s]", conditions.GetReason(hr, meta.ReadyCondition),
		strings.Join(history, ", "), strings.Join(stored, ", "))
}

// helmCLI returns a runner of the helm CLI of the tool cache on the test
// cluster, in ns, and the path of the podinfo chart pulled from repoURL.
func helmCLI(t *testing.T, ns, repoURL string) (func(t *testing.T, args ...string), string) {
	t.Helper()
	run := func(t *testing.T, args ...string) {
		t.Helper()
		if out, err := runHelm(t, ns, args...); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out)
		}
	}
	return run, pullChart(t, repoURL, env.Podinfo.Name, env.Podinfo.Version)
}

// runHelm runs the helm CLI of the tool cache on the test cluster, in ns,
// and returns what it printed.
func runHelm(t *testing.T, ns string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(framework.ToolPath(t, "helm"), append(args, "--kubeconfig", env.Cluster.Kubeconfig(), "--namespace", ns)...)
	return cmd.CombinedOutput()
}

// pullChart downloads chart name at version from the repository at
// repoURL, as a user would to upgrade by hand, and returns the archive's
// path.
func pullChart(t *testing.T, repoURL, name, version string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(framework.ToolPath(t, "helm"), "pull", "--repo", repoURL, name, "--version", version, "--destination", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm pull %s %s from %s: %v\n%s", name, version, repoURL, err, out)
	}
	return fmt.Sprintf("%s/%s-%s.tgz", dir, name, version)
}
