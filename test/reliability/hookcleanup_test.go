package reliability

import (
	"context"
	"fmt"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The hook cleanup cells (phaseHookCleanup) uninstall a release of the
// fault chart with spec.uninstall.deleteHookResources and strike while
// the cleanup deletes what the hooks left. Beside the release's three hook
// Jobs, the release has a hook the chart keeps and a hook whose object
// another release's hook of the same name replaced. Each run must end
// with the Jobs and their pods gone (deleted after the restart if the
// strike came first) and the other two objects still there.

// hookRivalChart is the chart of the other release: one hook ConfigMap
// named by its values.
const hookRivalChart = "hook-rival"

// sharedHookName is the hook the release of run name shares with its
// rival.
func sharedHookName(name string) string { return name + "-shared" }

// rivalName is the other release of the run name.
func rivalName(name string) string { return "rival-" + name }

// hookCleanupValues are appValues plus the kept and the shared hook.
func hookCleanupValues(tag string) string {
	return strings.TrimSuffix(appValues(tag, false), "}") +
		fmt.Sprintf(`,"keepHook":true,"sharedHook":%q}`, sharedHookName(tag))
}

// installRival installs the other release, whose hook replaces the shared
// hook of the release name (Helm's before-hook-creation), and checks that
// it did.
func (tr *trials) installRival(name string) error {
	ctx := context.Background()
	rival := framework.Release(tr.ns, rivalName(name), tr.repo, tr.rivalChart.Name, tr.rivalChart.Version,
		fmt.Sprintf(`{"hookName":%q}`, sharedHookName(name)))
	framework.Sharded(rival, tr.ctl)
	rival.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true}
	if err := env.Client.Create(ctx, rival); err != nil {
		return fmt.Errorf("creating the rival release: %w", err)
	}
	if err := tr.settle(rival, func(hr *v2.HelmRelease) error {
		return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
	}); err != nil {
		return fmt.Errorf("installing the rival release: %w", err)
	}
	var cm corev1.ConfigMap
	if err := env.Get(ctx, &cm, tr.ns, sharedHookName(name)); err != nil {
		return fmt.Errorf("the rival's hook: %w", err)
	}
	if cm.Data["owner"] != rival.Name {
		return fmt.Errorf("hook %s made by %q after the rival's install, want %q", cm.Name, cm.Data["owner"], rival.Name)
	}
	return nil
}

// hookObjectsGone returns nil once the hook Jobs of the release name and
// their pods are gone.
func hookObjectsGone(ctx context.Context, ns, name string) error {
	for _, suffix := range []string{"-pre", "-post", "-delete"} {
		job := name + suffix
		if err := env.Gone(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job}}); err != nil {
			return fmt.Errorf("hook Job %s left: %w", job, err)
		}
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pod(s) of hook Job %s left", len(pods.Items), job)
		}
	}
	return nil
}

// hookObjectsKept describes what is wrong with the objects no cleanup of
// the release name may delete: its kept hook, and the rival's hook of the
// same name as one of its own.
func hookObjectsKept(ctx context.Context, ns, name string) []string {
	var broken []string
	for cmName, owner := range map[string]string{name + "-keep": name, sharedHookName(name): rivalName(name)} {
		var cm corev1.ConfigMap
		if err := env.Get(ctx, &cm, ns, cmName); err != nil {
			broken = append(broken, fmt.Sprintf("deleted what the cleanup must leave: ConfigMap %s (made by %s): %v", cmName, owner, err))
			continue
		}
		if cm.Data["owner"] != owner {
			broken = append(broken, fmt.Sprintf("ConfigMap %s made by %q, want %q", cmName, cm.Data["owner"], owner))
		}
	}
	return broken
}
