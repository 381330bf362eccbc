// Command bench runs upstream Flux helm-controller and this controller side
// by side on fleets of podinfo HelmReleases and prints what each cost
// (`make bench`):
//
//	go run ./hack/bench -n 100,400 -controllers upstream,ours -out bench.md
//
// Every run gets a fresh local cluster; runs never overlap. See package
// test/bench for what is measured and how.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/afterhooks/helm-controller/test/bench"
)

type flags struct {
	releases    []int
	controllers []string
	out         string
	concurrent  int
	profileDir  string
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
	fs.StringVar(&f.profileDir, "profile", "", "save CPU (install and no-op phases) and heap profiles of ours to this directory")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if f.releases, err = parseSizes(*releases); err != nil {
		return f, err
	}
	f.controllers = splitList(*controllers)
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
	rows, runErr := bench.Run(ctx, bench.Options{
		Releases:    f.releases,
		Controllers: f.controllers,
		Concurrent:  f.concurrent,
		ProfileDir:  f.profileDir,
		Progress:    os.Stderr,
	})
	// Whatever was measured before a failure is still worth printing.
	if len(rows) == 0 {
		return runErr
	}
	fmt.Println()
	if err := bench.WriteText(os.Stdout, rows); err != nil {
		return errors.Join(runErr, fmt.Errorf("printing the table: %w", err))
	}
	if f.out != "" {
		if err := writeMarkdown(f.out, rows); err != nil {
			return errors.Join(runErr, err)
		}
	}
	return runErr
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
