// Command cluster starts and stops a local test cluster (see test/cluster)
// that outlives the command, for running the controller by hand:
//
//	go run ./hack/cluster up     [--dir DIR] [--name NAME] [--nodes N] [--crds DIRS]
//	go run ./hack/cluster status [--dir DIR]
//	go run ./hack/cluster down   [--dir DIR]
//
// `up` re-executes itself as `serve` in a new session, waits until the
// cluster is ready, prints the kubeconfig path and exits; the serve process
// keeps the cluster running until `down` signals it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

const defaultDir = ".cluster"

// defaultCRDDir is where this repository's own CRDs live; `up` installs them
// when run from the repository root so the controller can start right away.
const defaultCRDDir = "config/crd/bases"

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err == nil {
		return
	}
	var exit exitCode
	if errors.As(err, &exit) {
		os.Exit(int(exit))
	}
	fmt.Fprintln(os.Stderr, "cluster:", err)
	os.Exit(1)
}

// exitCode is an error that only sets the exit status (its message is
// already printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

const usage = `usage: cluster <command> [flags]

commands:
  up      start a cluster in the background and print its kubeconfig path
  status  report whether the cluster in --dir is running
  down    stop the cluster in --dir
`

type options struct {
	dir     string
	name    string
	nodes   int
	crdDirs string
}

func parseFlags(cmd string, args []string) (options, error) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	var o options
	fs.StringVar(&o.dir, "dir", defaultDir, "directory holding the cluster's state, logs and kubeconfig")
	if cmd == "up" || cmd == "serve" {
		fs.StringVar(&o.name, "name", "", "cluster name (default \"afterhooks\")")
		fs.IntVar(&o.nodes, "nodes", 1, "number of fake nodes")
		fs.StringVar(&o.crdDirs, "crds", defaultCRDsIfPresent(),
			"comma-separated directories of extra CRDs to install (empty: none)")
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, nil
}

func defaultCRDsIfPresent() string {
	if info, err := os.Stat(defaultCRDDir); err == nil && info.IsDir() {
		return defaultCRDDir
	}
	return ""
}

func (o options) extraCRDDirs() []string {
	var dirs []string
	for _, d := range strings.Split(o.crdDirs, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return exitCode(2)
	}
	cmd := args[0]
	o, err := parseFlags(cmd, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	dir, err := absDir(o.dir)
	if err != nil {
		return err
	}
	switch cmd {
	case "up":
		return up(ctx, dir, o, out)
	case "serve":
		return serve(ctx, dir, o, out)
	case "down":
		return down(dir, out)
	case "status":
		return status(ctx, dir, out)
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
