package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestResumeSurvivesTransientAPIErrors: a revision is held for its
// afterHooks readiness wait when the controller is killed. The next
// controller meets API errors on Helm storage while it resumes: reading
// the pending revision back, or recording it deployed. Neither is a failed
// install: nothing is uninstalled or rolled back, no failure is counted,
// and the wait resumes until the revision is deployed. Install remediation
// has retries, so a failure counted by mistake would uninstall.
func TestResumeSurvivesTransientAPIErrors(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	ref := env.PublishChart(t, framework.HookDelayChart, "0.1.0", ns)
	// The controller talks to the API server through the proxy, which
	// passes everything until the test tells it to fail requests.
	proxy := env.StartProxy(t)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "apiproxy-" + rand.String(8), Kubeconfig: proxy.Kubeconfig})

	for _, tc := range []struct {
		name string
		// method and skip choose the storage requests that fail: skip
		// of them pass after the restart (the reconcile's own read of the
		// last release is the first), then fail of them fail.
		method     string
		skip, fail int
	}{
		{name: "reading-the-pending-revision", method: http.MethodGet, skip: 1, fail: 2},
		{name: "recording-it-deployed", method: http.MethodPut, fail: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			framework.EnsureRunning(t, ctl)
			name := "flaky-" + tc.name[:4]
			hr := framework.AfterHooksRelease(ctl, ns, name, repo.Name, ref, `{"podAnnotations":{"sim.afterhooks.io/delay":"8s"}}`)
			hr.Spec.Install.Remediation = &helmv2.InstallRemediation{Retries: 3}
			env.Create(t, hr)
			env.Eventually(t, time.Minute, name+".v1 held for its readiness wait", func(ctx context.Context) error {
				framework.MustRun(t, ctl)
				return framework.HeldInstall(env.Storage(t, ns, name), true)
			})
			framework.Kill(t, ctl)

			proxy.Fail(framework.HelmStorageRequest(ns, name, tc.method), tc.skip, tc.fail)
			framework.Restart(t, ctl)
			env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1})
			if failed := proxy.Failed(); len(failed) != tc.fail {
				t.Fatalf("the proxy failed %d requests (%v), want %d: the fault was not exercised", len(failed), failed, tc.fail)
			} else {
				t.Logf("injected: %v", failed)
			}
			env.WantStorage(t, ns, name, "deployed")
			if st := hr.Status; st.InstallFailures != 0 || st.Failures != 0 {
				t.Errorf("installFailures %d, failures %d: a transient API error was counted", st.InstallFailures, st.Failures)
			}
			events, err := env.Events(context.Background(), ns, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events {
				switch e.Reason {
				case helmv2.UninstallSucceededReason, helmv2.UninstallFailedReason, helmv2.RollbackSucceededReason,
					helmv2.RollbackFailedReason, helmv2.InstallFailedReason:
					t.Errorf("event %s: %s", e.Reason, e.Message)
				}
			}
			env.WaitEvent(t, ns, name, framework.EventWant{
				Type: "Normal", Reason: framework.AfterHooksWaitingReason,
				Contains: fmt.Sprintf("Resuming the readiness wait of %s.v1", name),
			})
			if hr.Status.History.Latest().Version != 1 {
				t.Errorf("history %+v, want v1 only", hr.Status.History)
			}
		})
	}
}
