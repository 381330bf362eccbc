package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	eventv1 "github.com/fluxcd/pkg/apis/event/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestProgressEventsStayOutOfAlerts: an afterHooks install reports its
// phases with AfterHooksStarted and AfterHooksWaiting, which Kubernetes
// lists but notification-controller never receives (Flux's Trace type),
// while the outcome reaches it with the revision and token metadata
// upstream's outcome events carry.
func TestProgressEventsStayOutOfAlerts(t *testing.T) {
	ns := env.Namespace(t)
	sink := startEventSink(t)
	ctl := env.StartShard(t, ns, framework.ControllerOptions{
		Shard: "events-" + rand.String(8),
		Args:  []string{"--events-addr=" + sink.url},
	})
	framework.LogsOnFailure(t, ctl)
	repo := env.HelmRepository(t, ns)
	hr := framework.Sharded(framework.WithWaitStrategy(env.PodinfoRelease(ns, "progress", repo.Name, ""), v2.AfterHooks, time.Minute), ctl)
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Version: 1, Timeout: 3 * time.Minute})

	for _, reason := range []string{framework.AfterHooksStartedReason, framework.AfterHooksWaitingReason} {
		env.WaitEvent(t, ns, hr.Name, framework.EventWant{Type: corev1.EventTypeNormal, Reason: reason, Revision: true})
	}
	var install eventv1.Event
	env.Eventually(t, 30*time.Second, "the outcome reaches the notification endpoint", func(context.Context) error {
		got := sink.events()
		i := slices.IndexFunc(got, func(e eventv1.Event) bool { return e.Reason == helmv2.InstallSucceededReason })
		if i < 0 {
			return fmt.Errorf("no %s yet; got %v", helmv2.InstallSucceededReason, reasons(got))
		}
		install = got[i]
		return nil
	})
	group := helmv2.GroupVersion.Group + "/"
	if install.Severity != eventv1.EventSeverityInfo || install.Metadata[group+eventv1.MetaRevisionKey] != env.Podinfo.Version ||
		install.Metadata[group+eventv1.MetaTokenKey] == "" {
		t.Errorf("%s: severity %q, metadata %v; want info with the chart version as revision and a token",
			install.Reason, install.Severity, install.Metadata)
	}
	for _, e := range sink.events() {
		if e.Reason == framework.AfterHooksStartedReason || e.Reason == framework.AfterHooksWaitingReason {
			t.Errorf("progress event %s reached the notification endpoint: %+v", e.Reason, e)
		}
	}
	t.Logf("the notification endpoint received: %v", reasons(sink.events()))
}
