package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/redact"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestSecretValuesNeverLeak gives releases values from a Secret that hold a
// sentinel string, on the success path and on failure paths whose messages
// come from Helm, the chart's schema, the API server and value merging.
// Once each release has settled, the sentinel must appear in no controller
// log line, event, HelmRelease status or metric.
func TestSecretValuesNeverLeak(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	ctx := context.Background()
	sentinel := "s3ntinel-" + rand.String(12)

	repo := env.HelmRepository(t, ns)
	broken := env.PublishChart(t, "e2e-broken", "0.1.0", ns)

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		StringData: map[string]string{
			// podinfo shows ui.message on its page: a secret in a
			// rendered manifest, where it belongs.
			"message.yaml": "ui:\n  message: " + sentinel + "\n",
			// The API server refuses this policy and echoes it back.
			"pull-policy.yaml": "image:\n  pullPolicy: " + sentinel + "\n",
			// The chart's schema wants an integer.
			"replicas.yaml": "replicaCount: " + sentinel + "\n",
			// The chart fails to render; the secret is beside it.
			"broken.yaml": "broken: true\ntoken: " + sentinel + "\n",
			"token":       sentinel,
			// A password with a comma: --set syntax splits it there.
			"comma": "first," + sentinel,
			// Values that name the release's own namespace: public
			// already, so never blanked out of its messages.
			"public.yaml": "ui:\n  message: " + ns + "\n",
		},
	}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	fromSecret := func(hr *v2.HelmRelease, key, targetPath string) *v2.HelmRelease {
		hr.Spec.ValuesFrom = []helmv2.ValuesReference{{Kind: "Secret", Name: "creds", ValuesKey: key, TargetPath: targetPath}}
		hr.Spec.Install = &v2.Install{Install: helmv2.Install{
			Timeout:     &metav1.Duration{Duration: time.Minute},
			Remediation: &helmv2.InstallRemediation{Retries: 0},
		}}
		return hr
	}
	cases := []struct {
		hr *v2.HelmRelease
		// ready is the Ready status it must settle at, with reason.
		ready  metav1.ConditionStatus
		reason string
	}{
		{hr: fromSecret(env.PodinfoRelease(ns, "shown", repo.Name, ""), "message.yaml", ""), ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason},
		{hr: fromSecret(env.PodinfoRelease(ns, "refused", repo.Name, ""), "pull-policy.yaml", ""), ready: metav1.ConditionFalse, reason: helmv2.InstallFailedReason},
		{hr: fromSecret(framework.Release(ns, "schema", repo.Name, broken.Name, broken.Version, ""), "replicas.yaml", ""), ready: metav1.ConditionFalse, reason: helmv2.InstallFailedReason},
		{hr: fromSecret(framework.Release(ns, "template", repo.Name, broken.Name, broken.Version, ""), "broken.yaml", ""), ready: metav1.ConditionFalse, reason: helmv2.InstallFailedReason},
		{hr: fromSecret(env.PodinfoRelease(ns, "comma", repo.Name, ""), "comma", "ui.message"), ready: metav1.ConditionFalse, reason: "ValuesError"},
		{hr: fromSecret(env.PodinfoRelease(ns, "clash", repo.Name, `{"ui":"plain"}`), "token", "ui.message"), ready: metav1.ConditionFalse, reason: "ValuesError"},
		{hr: fromSecret(env.PodinfoRelease(ns, "public", repo.Name, ""), "public.yaml", ""), ready: metav1.ConditionTrue, reason: helmv2.InstallSucceededReason},
	}
	for _, tc := range cases {
		env.Create(t, tc.hr)
	}
	for _, tc := range cases {
		hr := tc.hr
		env.Eventually(t, 3*time.Minute, "HelmRelease "+hr.Name+" settles", func(ctx context.Context) error {
			if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
				return err
			}
			ready := conditions.Get(hr, meta.ReadyCondition)
			if ready == nil || hr.Status.LastAttemptedGeneration != hr.Generation && tc.reason != "ValuesError" {
				return fmt.Errorf("not attempted yet: %s", framework.Conditions(hr))
			}
			if ready.Status != tc.ready || ready.Reason != tc.reason {
				return fmt.Errorf("Ready %s/%s, want %s/%s: %s", ready.Status, ready.Reason, tc.ready, tc.reason, ready.Message)
			}
			if hr.Name == "public" && (strings.Contains(ready.Message, redact.Placeholder) || !strings.Contains(ready.Message, ns+"/")) {
				t.Errorf("Ready of %s blanks out its own namespace: %s", hr.Name, ready.Message)
			}
			return nil
		})
	}
	// The failure events are written after the status; give them a moment.
	time.Sleep(3 * time.Second)

	var leaks []string
	for _, tc := range cases {
		hr := tc.hr
		if err := env.Get(ctx, hr, ns, hr.Name); err != nil {
			t.Fatal(err)
		}
		status, err := json.Marshal(hr.Status)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(status), sentinel) {
			leaks = append(leaks, fmt.Sprintf("status of %s: %s", hr.Name, status))
		}
	}
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, sentinel) {
			leaks = append(leaks, fmt.Sprintf("event %s %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
		}
	}
	if strings.Contains(framework.Scrape(t, env.Controller.MetricsURL()), sentinel) {
		leaks = append(leaks, "metrics")
	}
	logData, err := os.ReadFile(env.Controller.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(logData), "\n") {
		if strings.Contains(line, sentinel) {
			leaks = append(leaks, "log: "+line)
		}
	}
	if len(leaks) > 0 {
		t.Errorf("the Secret's value leaked %d time(s):\n%s", len(leaks), strings.Join(leaks, "\n"))
	}
}
