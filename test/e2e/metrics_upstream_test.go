package e2e

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// toolchainMetricPrefixes are Go runtime families that differ with the Go
// toolchain and the go directive a binary is built with, not with the
// controller: one per GODEBUG setting whose default changed.
var toolchainMetricPrefixes = []string{"go_godebug_non_default_behavior_"}

// ownMetricPrefixes are the metric families of ours that upstream has no
// counterpart for: helm_controller_ for ours alone, and gotk_chart_ for the
// chart cache, named by fluxcd/pkg/cache as upstream's token cache is
// (gotk_token_).
var ownMetricPrefixes = []string{"helm_controller_", "gotk_chart_"}

// TestMetricsMatchUpstream runs upstream helm-controller v1.6.4 and ours
// side by side, each installing the same release, and compares what their
// /metrics serve: every family upstream serves we serve with the same type
// and the same label names, and we serve nothing else but our own
// prefixed families.
func TestMetricsMatchUpstream(t *testing.T) {
	type side struct {
		name, binary string
		ctl          *framework.Controller
		families     map[string]*dto.MetricFamily
	}
	sides := []*side{{name: "upstream", binary: framework.UpstreamBinary(t)}, {name: "ours"}}
	for _, s := range sides {
		ns := env.Namespace(t)
		repo := env.HelmRepository(t, ns)
		s.ctl = env.StartShard(t, ns, framework.ControllerOptions{Shard: "metrics-" + rand.String(8), Binary: s.binary})
		framework.EnsureRunning(t, s.ctl)
		hr := framework.Sharded(env.PodinfoRelease(ns, "metrics", repo.Name, ""), s.ctl)
		env.Create(t, hr)
		env.WaitRelease(t, hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason, Timeout: 3 * time.Minute})
	}
	for _, s := range sides {
		env.Eventually(t, 30*time.Second, s.name+" serves its reconcile metrics", func(ctx context.Context) error {
			page, err := framework.ScrapeContext(ctx, s.ctl.MetricsURL())
			if err != nil {
				return err
			}
			if s.families, err = parseMetrics(page); err != nil {
				return err
			}
			if _, ok := s.families["controller_runtime_reconcile_total"]; !ok {
				return fmt.Errorf("no controller_runtime_reconcile_total yet")
			}
			return nil
		})
	}
	upstream, ours := sides[0].families, sides[1].families
	for _, families := range []map[string]*dto.MetricFamily{upstream, ours} {
		maps.DeleteFunc(families, func(name string, _ *dto.MetricFamily) bool { return hasAnyPrefix(name, toolchainMetricPrefixes) })
	}
	t.Logf("upstream serves %d families: %s", len(upstream), strings.Join(slices.Sorted(maps.Keys(upstream)), " "))

	for name, up := range upstream {
		our, ok := ours[name]
		if !ok {
			t.Errorf("upstream serves %s (%s), we do not", name, up.GetType())
			continue
		}
		if our.GetType() != up.GetType() {
			t.Errorf("%s: our type %s, upstream's %s", name, our.GetType(), up.GetType())
		}
		if got, want := labelNames(our), labelNames(up); !slices.Equal(got, want) {
			t.Errorf("%s: our label names %v, upstream's %v", name, got, want)
		}
	}
	for name, our := range ours {
		if _, ok := upstream[name]; ok {
			continue
		}
		if !hasAnyPrefix(name, ownMetricPrefixes) {
			t.Errorf("we serve %s (%s, labels %v), upstream v1.6.4 does not and it has no prefix of ours", name, our.GetType(), labelNames(our))
		}
		if err := followsFluxNaming(our); err != nil {
			t.Errorf("our metric %s: %v", name, err)
		}
	}
}

// followsFluxNaming checks the Prometheus conventions Flux's own metrics
// follow: snake_case, counters end in _total and nothing else does,
// durations are histograms in seconds.
func followsFluxNaming(f *dto.MetricFamily) error {
	name := f.GetName()
	counter := f.GetType() == dto.MetricType_COUNTER
	switch {
	case !snakeCase.MatchString(name):
		return fmt.Errorf("not snake_case")
	case counter != strings.HasSuffix(name, "_total"):
		return fmt.Errorf("a %s: counters, and only counters, end in _total", f.GetType())
	case strings.Contains(name, "duration") && (f.GetType() != dto.MetricType_HISTOGRAM || !strings.HasSuffix(name, "_seconds")):
		return fmt.Errorf("a duration must be a histogram in seconds, is a %s", f.GetType())
	}
	return nil
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

func parseMetrics(page string) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return families, nil
}

// labelNames lists each distinct set of label names a family's series use,
// e.g. ["controller,result"].
func labelNames(f *dto.MetricFamily) []string {
	var sets []string
	for _, m := range f.GetMetric() {
		var names []string
		for _, l := range m.GetLabel() {
			names = append(names, l.GetName())
		}
		slices.Sort(names)
		if set := strings.Join(names, ","); !slices.Contains(sets, set) {
			sets = append(sets, set)
		}
	}
	slices.Sort(sets)
	return sets
}

func hasAnyPrefix(name string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}
