package bench

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Metric names read by the benchmark.
const (
	apiServerRequests  = "apiserver_request_total"
	clientRequests     = "rest_client_requests_total"
	oursChartDownloads = "helm_controller_chart_downloads_total"
)

// sumMetric adds up every series of the named metric in a Prometheus text
// exposition. A metric that is absent is an error: a renamed metric must
// not read as zero.
func sumMetric(exposition, name string) (float64, error) {
	var sum float64
	found := false
	err := eachSample(exposition, name, func(_ map[string]string, v float64) {
		sum += v
		found = true
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("metric %s is not exposed", name)
	}
	return sum, nil
}

// splitSample cuts a sample line into its series (name and labels) and its
// value; an optional timestamp after the value is dropped. Label values may
// hold spaces, so the series ends at the closing brace when there is one.
func splitSample(line string) (series, value string, ok bool) {
	rest := line
	if open := strings.IndexByte(line, '{'); open >= 0 {
		closing := strings.LastIndexByte(line, '}')
		if closing < open {
			return "", "", false
		}
		series, rest = line[:closing+1], line[closing+1:]
	} else {
		name, after, found := strings.Cut(line, " ")
		if !found {
			return "", "", false
		}
		series, rest = name, after
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", false
	}
	return series, fields[0], true
}

func metricName(series string) string {
	name, _, _ := strings.Cut(series, "{")
	return name
}

// apiServerRequestCount is the total of apiserver_request_total: every
// request any client made so far.
func (env *environment) apiServerRequestCount(ctx context.Context) (float64, error) {
	body, err := env.apiServer.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	return sumMetric(string(body), apiServerRequests)
}

// controllerMetric reads one metric from the controller's /metrics.
func (p *controllerProcess) controllerMetric(ctx context.Context, name string) (float64, error) {
	body, err := fetch(ctx, p.metricsBase+"/metrics")
	if err != nil {
		return 0, fmt.Errorf("scraping the %s controller's metrics: %w", p.name, err)
	}
	v, err := sumMetric(string(body), name)
	if err != nil {
		return 0, fmt.Errorf("%s controller: %w", p.name, err)
	}
	return v, nil
}

// reconcileCount is the Flux metric both controllers record after each
// reconcile of an object, one series per object (kind, namespace, name).
const reconcileCount = "gotk_reconcile_duration_seconds_count"

// labelPair is one name="value" of a series; values may hold escaped quotes.
var labelPair = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// reconciledObjects names (namespace/name) the objects of kind that the
// exposition shows reconciled at least once.
func reconciledObjects(exposition, kind string) (map[string]bool, error) {
	names := map[string]bool{}
	err := eachSample(exposition, reconcileCount, func(labels map[string]string, v float64) {
		if labels["kind"] == kind && v > 0 {
			names[labels["namespace"]+"/"+labels["name"]] = true
		}
	})
	return names, err
}

// eachSample calls fn with the labels and value of every sample of the
// named metric in exposition.
func eachSample(exposition, name string, fn func(labels map[string]string, value float64)) error {
	for line := range strings.Lines(exposition) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, value, ok := splitSample(line)
		if !ok || metricName(series) != name {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("parsing the value of %q: %w", line, err)
		}
		labels := map[string]string{}
		for _, m := range labelPair.FindAllStringSubmatch(series, -1) {
			labels[m[1]] = m[2]
		}
		fn(labels, v)
	}
	return nil
}

// reconciledReleases names the HelmReleases this process reconciled since
// it started.
func (p *controllerProcess) reconciledReleases(ctx context.Context) (map[string]bool, error) {
	body, err := fetch(ctx, p.metricsBase+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("scraping the %s controller's metrics: %w", p.name, err)
	}
	return reconciledObjects(string(body), "HelmRelease")
}

// requestsByKind adds up apiserver_request_total by verb and resource
// (with its subresource), e.g. "PATCH helmreleases/status".
func requestsByKind(exposition string) (map[string]float64, error) {
	counts := map[string]float64{}
	err := eachSample(exposition, apiServerRequests, func(labels map[string]string, v float64) {
		kind := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			kind += "/" + sub
		}
		counts[kind] += v
	})
	return counts, err
}

// apiServerRequestsByKind reads requestsByKind from the API server.
func (env *environment) apiServerRequestsByKind(ctx context.Context) (map[string]float64, error) {
	body, err := env.apiServer.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	return requestsByKind(string(body))
}

// topGrowth describes the n kinds of request that grew most from before
// to after, each with its count per release.
func topGrowth(before, after map[string]float64, releases, n int) string {
	type growth struct {
		kind  string
		count float64
	}
	var all []growth
	for kind, v := range after {
		if d := v - before[kind]; d > 0 {
			all = append(all, growth{kind, d})
		}
	}
	slices.SortFunc(all, func(a, b growth) int {
		if a.count != b.count {
			return cmp.Compare(b.count, a.count)
		}
		return strings.Compare(a.kind, b.kind)
	})
	parts := make([]string, 0, n)
	for _, g := range all[:min(n, len(all))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", g.kind, g.count/float64(releases)))
	}
	return strings.Join(parts, ", ")
}
