package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestATimeoutTooShortToWatchIsWordedAsUpstream installs podinfo with a
// timeout of 1 ms under upstream's binary and under ours. The wait cannot
// even start its watch in that time: what each says after "with chart
// podinfo@…: " is compared. Ours must be one line and start with
// upstream's words, word for word; the detail it keeps comes after them,
// in parentheses (issue 44, item 7).
func TestATimeoutTooShortToWatchIsWordedAsUpstream(t *testing.T) {
	t.Parallel()
	said := map[string]string{}
	for _, side := range []struct{ name, binary string }{
		{"upstream", framework.UpstreamBinary(t)},
		{"ours", ""},
	} {
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		ctl := env.StartShard(t, ns, framework.ControllerOptions{Shard: "timeout-" + rand.String(8), Binary: side.binary})
		framework.EnsureRunning(t, ctl)
		hr := framework.Sharded(env.PodinfoRelease(ns, "quick", repo.Name, `{"replicaCount":1}`), ctl)
		hr.Spec.Timeout = &metav1.Duration{Duration: time.Millisecond}
		env.Create(t, hr)
		env.WaitNotReady(t, hr, helmv2.InstallFailedReason, "")
		msg := conditions.GetMessage(hr, meta.ReadyCondition)
		_, after, ok := strings.Cut(msg, "with chart "+env.Podinfo.Name+"@"+env.Podinfo.Version+": ")
		if !ok {
			t.Fatalf("%s: Ready message %q does not name the chart as upstream does", side.name, msg)
		}
		if strings.ContainsAny(msg, "\r\n") {
			t.Errorf("%s: Ready message spans lines: %q", side.name, msg)
		}
		said[side.name] = strings.ReplaceAll(after, ns, "<ns>")
		t.Logf("%s says: %s", side.name, said[side.name])
	}
	upstreamLead, upstreamItems, upstreamRest := bracketed(said["upstream"])
	oursLead, oursItems, oursRest := bracketed(said["ours"])
	slices.Sort(upstreamItems)
	slices.Sort(oursItems)
	// Upstream's order of the objects changes from run to run.
	if oursLead != upstreamLead || !slices.Equal(oursItems, upstreamItems) || upstreamRest != "" ||
		(oursRest != "" && !strings.HasPrefix(oursRest, " (")) {
		t.Errorf("a 1 ms timeout:\n  upstream: %s\n  ours:     %s", said["upstream"], said["ours"])
	}
}

// bracketed splits "lead: [a, b] rest" into its lead, the items of its
// first bracketed list and what follows the list.
func bracketed(s string) (lead string, items []string, rest string) {
	lead, list, ok := strings.Cut(s, "[")
	if !ok {
		return s, nil, ""
	}
	list, rest, _ = strings.Cut(list, "]")
	return lead, strings.Split(list, ", "), rest
}
