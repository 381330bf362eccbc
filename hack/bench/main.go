// Command bench runs upstream Flux helm-controller and this controller side
// by side on fleets of podinfo HelmReleases and prints what each cost
// (`make bench`):
//
//	go run ./hack/bench -n 100,400 -controllers upstream,ours -out bench.md
//	go run ./hack/bench -n 100,400 -json runs.json -svg docs/bench
//	go run ./hack/bench -from upstream.json,ours.json -svg docs/bench
//
// Every run gets a fresh local cluster; runs never overlap. -json keeps
// the measurements; -from draws and prints saved ones without running
// anything, so that runs made apart (upstream's take long) end up in one
// table and one set of charts. See package test/bench for what is
// measured and how.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/afterhooks/helm-controller/test/bench"
)

type flags struct {
	releases    []int
	controllers []string
	out         string
	concurrent  int
	qps, burst  int
	shards      int
	interval    time.Duration
	steady      time.Duration
	profileDir  string
	svgDir      string
	jsonOut     string
	from        []string
}

func main() {
	f, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	// The bench's own client logs nothing worth reading; without a logger
	// controller-runtime prints a stack trace once the process is 30 s old.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, f)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "bench: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (flags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	releases := fs.String("n", "100", "fleet sizes, comma-separated (e.g. 100,400)")
	controllers := fs.String("controllers", bench.Upstream+","+bench.Ours, "controllers to run, comma-separated, in order: "+bench.Upstream+", "+bench.Ours+", "+bench.OursAfterHooks+" (ours with waitStrategy afterHooks)")
	var f flags
	fs.StringVar(&f.out, "out", "", "also write the tables as Markdown to this file")
	fs.IntVar(&f.concurrent, "concurrent", bench.DefaultConcurrent, "--concurrent for both controllers")
	fs.IntVar(&f.qps, "kube-api-qps", 0, "--kube-api-qps for both controllers (0: their default, 50)")
	fs.IntVar(&f.burst, "kube-api-burst", 0, "--kube-api-burst for both controllers (0: their default, 300)")
	fs.DurationVar(&f.interval, "interval", bench.DefaultInterval, "every release's spec.interval")
	fs.DurationVar(&f.steady, "steady", 0, "after the restart, leave the fleet alone this long and measure the cost at rest, scaled to an hour (at least the interval plus its jitter to see every release once; 0: skip)")
	fs.IntVar(&f.shards, "shards", 0, "run this many controllers, each with --watch-label-selector=sharding.fluxcd.io/key=shard<i>, sharing the fleet (0: one controller)")
	fs.StringVar(&f.profileDir, "profile", "", "save CPU (install and no-op phases) and heap profiles of ours to this directory")
	fs.StringVar(&f.svgDir, "svg", "", "draw CPU per release, peak RSS and time to Ready against N as SVG charts into this directory")
	fs.StringVar(&f.jsonOut, "json", "", "save the measurements as JSON to this file")
	from := fs.String("from", "", "comma-separated JSON files of earlier runs (-json) to print and draw instead of running")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	f.from = splitList(*from)
	var err error
	if f.releases, err = parseSizes(*releases); err != nil {
		return f, err
	}
	f.controllers = splitList(*controllers)
	if f.shards < 0 {
		return f, fmt.Errorf("-shards must be 0 or more, got %d", f.shards)
	}
	if f.interval <= 0 || f.steady < 0 {
		return f, fmt.Errorf("-interval must be positive and -steady not negative, got %s and %s", f.interval, f.steady)
	}
	if f.qps < 0 || f.burst < 0 {
		return f, fmt.Errorf("-kube-api-qps and -kube-api-burst must not be negative, got %d and %d", f.qps, f.burst)
	}
	if f.concurrent < 1 {
		return f, fmt.Errorf("-concurrent must be at least 1, got %d", f.concurrent)
	}
	return f, nil
}

func parseSizes(list string) ([]int, error) {
	var sizes []int
	for _, item := range splitList(list) {
		n, err := strconv.Atoi(item)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-n: %q is not a positive number of releases", item)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 {
		return nil, errors.New("-n: no fleet size given")
	}
	return sizes, nil
}

func splitList(list string) []string {
	var items []string
	for item := range strings.SplitSeq(list, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

func run(ctx context.Context, f flags) error {
	rows, runErr := measure(ctx, f)
	// Whatever was measured before a failure is still worth printing.
	if len(rows) == 0 {
		return runErr
	}
	fmt.Println()
	if err := bench.WriteText(os.Stdout, rows); err != nil {
		return errors.Join(runErr, fmt.Errorf("printing the table: %w", err))
	}
	return errors.Join(runErr, save(f, rows))
}

// measure runs the benchmark, or with -from reads the rows of earlier
// runs.
func measure(ctx context.Context, f flags) ([]bench.Row, error) {
	if len(f.from) > 0 {
		return readRows(f.from)
	}
	return bench.Run(ctx, bench.Options{
		Releases:     f.releases,
		Controllers:  f.controllers,
		Concurrent:   f.concurrent,
		KubeAPIQPS:   f.qps,
		KubeAPIBurst: f.burst,
		Shards:       f.shards,
		Interval:     f.interval,
		Steady:       f.steady,
		ProfileDir:   f.profileDir,
		Progress:     os.Stderr,
	})
}

// save writes the rows where the flags ask: Markdown, JSON and charts.
func save(f flags, rows []bench.Row) error {
	var errs []error
	if f.out != "" {
		errs = append(errs, writeMarkdown(f.out, rows))
	}
	if f.jsonOut != "" {
		errs = append(errs, writeJSON(f.jsonOut, rows))
	}
	if f.svgDir != "" {
		errs = append(errs, bench.WritePlots(f.svgDir, rows))
	}
	return errors.Join(errs...)
}

func writeJSON(path string, rows []bench.Row) error {
	data, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the measurements: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readRows reads the rows saved by -json in each file, in order.
func readRows(paths []string) ([]bench.Row, error) {
	var all []bench.Row
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading measurements: %w", err)
		}
		var rows []bench.Row
		if err := json.Unmarshal(data, &rows); err != nil {
			return nil, fmt.Errorf("reading measurements from %s: %w", path, err)
		}
		all = append(all, rows...)
	}
	return all, nil
}

func writeMarkdown(path string, rows []bench.Row) error {
	var b strings.Builder
	if err := bench.WriteMarkdown(&b, rows); err != nil {
		return fmt.Errorf("rendering the Markdown table: %w", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
