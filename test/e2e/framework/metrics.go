package framework

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Scrape returns the metrics page at url.
func Scrape(t testing.TB, url string) string {
	t.Helper()
	page, err := ScrapeContext(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// ScrapeContext is Scrape returning the failure, for polls on a
// controller that may not serve metrics yet.
func ScrapeContext(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading metrics: %w", err)
	}
	return string(b), nil
}

// MetricValue sums the samples of a metric on the page; name is a bare
// metric name or one series with its labels. ok is false when the page
// has no such sample.
func MetricValue(page, name string) (sum float64, ok bool, err error) {
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") &&
			!(strings.HasSuffix(name, "}") && strings.HasPrefix(line, name)) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, false, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
		ok = true
	}
	return sum, ok, nil
}

// Metric is MetricValue on the metrics of url, failing the test when the
// metric is not exposed.
func Metric(t testing.TB, url, name string) float64 {
	t.Helper()
	v, ok, err := MetricValue(Scrape(t, url), name)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("metric %s not exposed", name)
	}
	return v
}

// ScrapeURL returns the metrics page at url, empty when it cannot be read.
func ScrapeURL(url string) string {
	page, _ := ScrapeContext(context.Background(), url)
	return page
}
