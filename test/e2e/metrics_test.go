package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestMetrics scrapes the shared controller's /metrics after a release and
// checks the series upstream helm-controller v1.6.x exposes, with its names
// and labels, so Flux's dashboards and alerts keep working: the Flux
// runtime's reconcile duration and controller-runtime's own series.
func TestMetrics(t *testing.T) {
	ns := env.Namespace(t)
	repo := env.HelmRepository(t, ns)
	hr := env.PodinfoRelease(ns, "metrics", repo.Name, "")
	env.Create(t, hr)
	env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})

	object := `kind="HelmRelease",name="metrics",namespace="` + ns + `"`
	// Each pattern must match a whole series line (name{labels} value).
	wants := []string{
		// fluxcd/pkg/runtime metrics recorder.
		`gotk_reconcile_duration_seconds_bucket\{` + object + `,le="[^"]+"\} \d+`,
		`gotk_reconcile_duration_seconds_count\{` + object + `\} [1-9]\d*`,
		// The chart cache, as fluxcd/pkg/cache names its metrics: the first
		// fetch of the release's chart was a miss.
		`gotk_chart_cache_events_total\{event_type="cache_miss",` + object + `,operation="reconcile"\} [1-9]\d*`,
		`gotk_chart_cached_items \d+`,
		`helm_controller_chart_downloads_total [1-9]\d*`,
		// controller-runtime, labelled with the controller's name.
		// A Ready release requeues after its interval: result requeue_after.
		`controller_runtime_reconcile_total\{controller="helmrelease",result="requeue_after"\} [1-9]\d*`,
		`controller_runtime_reconcile_total\{controller="helmrelease",result="success"\} \d+`,
		`controller_runtime_reconcile_errors_total\{controller="helmrelease"\} \d+`,
		`controller_runtime_reconcile_time_seconds_count\{controller="helmrelease"\} [1-9]\d*`,
		`controller_runtime_max_concurrent_reconciles\{controller="helmrelease"\} 4`,
		`controller_runtime_active_workers\{controller="helmrelease"\} \d+`,
		`workqueue_adds_total\{controller="helmrelease",name="helmrelease"\} [1-9]\d*`,
		`workqueue_depth\{controller="helmrelease",name="helmrelease",priority="[^"]*"\} \d+`,
		`rest_client_requests_total\{code="200",host="[^"]+",method="GET"\} [1-9]\d*`,
		// Go runtime and process collectors.
		`go_goroutines \d+`,
		`process_resident_memory_bytes [\d.e+]+`,
	}

	var body string
	env.Eventually(t, 30*time.Second, "every expected series on /metrics", func(ctx context.Context) error {
		body = framework.Scrape(t, env.Controller.MetricsURL())
		var missing []string
		for _, w := range wants {
			if !regexp.MustCompile(`(?m)^` + w + `$`).MatchString(body) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing series:\n  %s", strings.Join(missing, "\n  "))
		}
		return nil
	})

	// Our own series carry a prefix of their own and never reuse gotk_
	// names; the provider token cache (kubeConfig.configMapRef) uses
	// gotk_token_ as upstream does, the chart cache gotk_chart_ likewise.
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "# TYPE gotk_") {
			name := strings.Fields(line)[2]
			switch {
			// gotk_reconcile_condition and gotk_suspend_status are gone, as
			// from upstream v1.6.4's /metrics (TestMetricsMatchUpstream).
			case name == "gotk_reconcile_duration_seconds":
			case strings.HasPrefix(name, "gotk_token_"), strings.HasPrefix(name, "gotk_chart_"):
			default:
				t.Errorf("unexpected gotk_ metric family %s", name)
			}
		}
	}
}
