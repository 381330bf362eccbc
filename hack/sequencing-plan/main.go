// Command sequencing-plan prints the order a HelmRelease with
// spec.waitStrategy.name ordered would apply a chart in, and the
// warnings about its ordering annotations, without a cluster: for chart
// authors to check their annotations in CI.
//
//	go run ./hack/sequencing-plan [-f values.yaml]... [-name release] [-namespace ns] <chart directory or archive>
//
// make sequencing-plan CHART=<path> [VALUES=<file>] runs it. It exits 1
// on an error (a cycle, a broken annotation) and 2 on bad usage; with
// -strict, warnings fail it too.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// errWarnings fails a strict run whose plan has warnings.
var errWarnings = errors.New("the plan has warnings")

type valueFiles []string

func (v *valueFiles) String() string     { return strings.Join(*v, ",") }
func (v *valueFiles) Set(s string) error { *v = append(*v, s); return nil }

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "sequencing-plan:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	flags := flag.NewFlagSet("sequencing-plan", flag.ContinueOnError)
	var files valueFiles
	flags.Var(&files, "f", "a values file (repeatable; later ones win)")
	name := flags.String("name", "", "the release name (default: the chart's name)")
	namespace := flags.String("namespace", "default", "the release namespace")
	strict := flags.Bool("strict", false, "fail when the plan has warnings")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 1 {
		flags.Usage()
		return flag.ErrHelp
	}
	chrt, err := loader.Load(flags.Arg(0))
	if err != nil {
		return fmt.Errorf("loading chart: %w", err)
	}
	values := map[string]any{}
	for _, file := range files {
		v, err := common.ReadValuesFile(file)
		if err != nil {
			return err
		}
		values = loader.MergeMaps(values, v)
	}
	if *name == "" {
		*name = chrt.Name()
	}
	plan, err := sequencing.DryRun(ctx, chrt, values, *name, *namespace)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "chart %s, release %s in namespace %s: ", chrt.Name(), *name, *namespace)
	if err := plan.Describe(out); err != nil {
		return err
	}
	if *strict && len(plan.Warnings) > 0 {
		return errWarnings
	}
	return nil
}
