package plancmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/features"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/reconcile"
	"github.com/afterhooks/helm-controller/internal/scheme"
)

// Exit codes, as `flux diff` has them.
const (
	ExitNoChange = 0
	ExitChanges  = 1
	ExitError    = 2
)

// The client rate limits of a plan, those of the controller's flags.
const (
	planQPS   = 50
	planBurst = 300
)

// options are the command's flags.
type options struct {
	namespace   string
	file        string
	chart       string
	values      []string
	output      string
	kubeconfig  string
	kubecontext string
	hookOrder   string
	color       string
	sourceHost  string
	name        string
	// namespaceFlag: -n was given, and wins over the file's namespace.
	namespaceFlag bool
	// settings choose the controller whose settings the plan predicts
	// with, and override them.
	settings settingsFlags
	// fileData is what --file holds, read before the plan.
	fileData []byte
}

// Run runs `plan` with args (what follows "plan" on the command line) and
// returns the exit code. terminal tells whether stdout is a terminal (the
// text is coloured then, unless --color says otherwise). `--file -` reads
// the process's standard input.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, terminal bool) int {
	return RunWithStdin(ctx, args, os.Stdin, stdout, stderr, terminal)
}

// RunWithStdin is Run with stdin as what `--file -` reads.
func RunWithStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, terminal bool) int {
	code, err := runPlan(ctx, args, stdin, stdout, stderr, terminal)
	if err != nil {
		fmt.Fprintln(stderr, "plan: "+oneLine(err.Error()))
		return ExitError
	}
	return code
}

// runPlan is Run up to the error, which Run prints.
func runPlan(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, terminal bool) (int, error) {
	opts, err := parse(args)
	var help *helpRequested
	if errors.As(err, &help) {
		_, err := fmt.Fprintf(stdout, "%s\n\nFlags:\n%s", usageLine, help.flags)
		return ExitNoChange, err
	}
	if err != nil {
		return ExitError, err
	}
	if opts.file != "" {
		if opts.fileData, err = readInput(opts.file, stdin); err != nil {
			return ExitError, err
		}
		docs, err := splitDocuments(opts.fileData)
		if err != nil {
			return ExitError, err
		}
		if len(docs) > 1 {
			return runStream(ctx, opts, docs, stdout, stderr, terminal)
		}
	}
	pv, err := plan(ctx, opts)
	if err != nil {
		return ExitError, err
	}
	if err := write(stdout, pv, opts, terminal); err != nil {
		return ExitError, err
	}
	if pv.Changes() {
		return ExitChanges, nil
	}
	return ExitNoChange, nil
}

func parse(args []string) (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.StringVarP(&o.namespace, "namespace", "n", "", "the namespace of the HelmRelease (default: the file's, else the kubeconfig's)")
	fs.StringVar(&o.file, "file", "", "a HelmRelease manifest to plan instead of the live spec (the live status is used when there is one); - reads stdin; several documents (kustomize build) plan every HelmRelease among them")
	fs.StringVar(&o.chart, "chart", "", "a chart directory or archive to plan with instead of the source's artifact")
	fs.StringArrayVarP(&o.values, "values", "f", nil, "a values file merged over the composed values (repeatable; later ones win)")
	fs.StringVarP(&o.output, "output", "o", "text", "output format: text, json or markdown (a summary for a pull request comment)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig (default: KUBECONFIG, else ~/.kube/config)")
	fs.StringVar(&o.kubecontext, "context", "", "the kubeconfig context to use")
	fs.StringVar(&o.hookOrder, "default-wait-strategy", string(v2.BeforeHooks), "the hook order of actions that leave waitStrategy unset: beforeHooks or afterHooks (default: as the DefaultToAfterHooks gate says)")
	fs.StringVar(&o.sourceHost, "source-host", "", "HOST:PORT to download the source's artifact from instead of the host in its URL (a port-forward of source-controller)")
	fs.StringVar(&o.color, "color", "auto", "colour the text: auto (on a terminal), always or never")
	bindSettingsFlags(fs, &o.settings)
	fs.Usage = func() {}
	if err := fs.Parse(args); errors.Is(err, pflag.ErrHelp) {
		return nil, &helpRequested{flags: fs.FlagUsages()}
	} else if err != nil {
		return nil, usage(err)
	}
	switch {
	case fs.NArg() > 1:
		return nil, usage(fmt.Errorf("one HelmRelease name expected, got %q", fs.Args()))
	case fs.NArg() == 0 && o.file == "":
		return nil, usage(errors.New("a HelmRelease name or --file is needed"))
	case o.output != "text" && o.output != "json" && o.output != "markdown":
		return nil, usage(fmt.Errorf("--output %q: text, json or markdown", o.output))
	case o.hookOrder != string(v2.BeforeHooks) && o.hookOrder != string(v2.AfterHooks):
		return nil, usage(fmt.Errorf("--default-wait-strategy %q: beforeHooks or afterHooks", o.hookOrder))
	}
	// A gate the controller would refuse is refused here, before any
	// request.
	if _, err := features.Resolve(o.settings.featureGates); err != nil {
		return nil, usage(fmt.Errorf("--feature-gates: %w", err))
	}
	o.name = fs.Arg(0)
	o.namespaceFlag = fs.Changed("namespace")
	o.settings.noteChanged(fs)
	return o, nil
}

// usageLine is how the command is called.
const usageLine = "usage: helm-controller plan -n NAMESPACE NAME [--file hr.yaml|-] [--chart DIR|TGZ] [-f values.yaml] [-o text|json|markdown] [--kubeconfig FILE] [--controller-namespace NS] [--feature-gates GATE=BOOL,...]"

// helpRequested is -h or --help: the flags are printed, nothing planned.
type helpRequested struct{ flags string }

func (h *helpRequested) Error() string { return "help requested" }

func usage(err error) error {
	return fmt.Errorf("%w (%s)", err, usageLine)
}

// session is what every release of a run is planned with: the cluster,
// Helm's access to it, and the controller's settings.
type session struct {
	restCfg *rest.Config
	cluster client.Client
	factory *action.ConfigFactory
	set     *settings
}

// openSession reads the kubeconfig and connects to the cluster. The
// controller's settings are read later, by settingsOf.
func openSession(o *options) (*session, error) {
	restCfg, namespace, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	if o.namespace == "" {
		o.namespace = namespace
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	factory, err := action.NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to the cluster: %w", err)
	}
	return &session{restCfg: restCfg, cluster: c, factory: factory}, nil
}

// settingsOf reads the controller's settings once per run.
func (s *session) settingsOf(ctx context.Context, o *options) (*settings, error) {
	if s.set != nil {
		return s.set, nil
	}
	set, err := controllerSettings(ctx, s.cluster, o)
	if err != nil {
		return nil, err
	}
	s.set = set
	return set, nil
}

// plan reads everything the preview of one HelmRelease needs and
// computes it.
func plan(ctx context.Context, o *options) (*preview.Preview, error) {
	s, err := openSession(o)
	if err != nil {
		return nil, err
	}
	obj, err := helmRelease(ctx, s.cluster, o)
	if err != nil {
		return nil, err
	}
	return planRelease(ctx, s, s.cluster, obj, o)
}

// planRelease previews obj, reading its values and sources through c:
// the cluster, or the cluster overlaid with a stream's documents.
func planRelease(ctx context.Context, s *session, c client.Client, obj *v2.HelmRelease, o *options) (*preview.Preview, error) {
	values, secrets, err := composeValues(ctx, c, obj, o.values)
	if err != nil {
		return nil, err
	}
	set, err := s.settingsOf(ctx, o)
	if err != nil {
		return nil, err
	}
	chrt, chartFrom, err := loadChart(ctx, c, obj, o, !set.enabled(features.DisableChartDigestTracking))
	if err != nil {
		return nil, err
	}
	helm, err := releaseRunner(ctx, s.restCfg, c, s.factory, obj.DeepCopy(), set)
	if err != nil {
		return nil, err
	}
	in := preview.Input{Object: obj, Chart: chrt, Values: values, Secrets: secrets,
		DefaultToRetryOnFailure: set.enabled(features.DefaultToRetryOnFailure), Helm: helm, Lookup: objectLookup(c, obj)}
	if reconcile.TargetChanged(obj, chrt.Metadata.Name) != "" {
		// The controller first uninstalls the release the status records.
		if in.Previous, err = releaseRunner(ctx, s.restCfg, c, s.factory, reconcile.PreviousTarget(obj), set); err != nil {
			return nil, err
		}
	}
	pv, err := preview.Compute(ctx, in)
	if err != nil {
		return nil, err
	}
	pv.Chart.Source = chartFrom
	pv.Settings = set.show()
	return pv, nil
}

// restConfig is the kubeconfig's, and its namespace.
func restConfig(o *options) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.kubecontext})
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	// client-go's defaults (5 requests a second, bursts of 10) would
	// throttle a plan of a large chart, whose reads and dry runs per
	// object come to a few hundred requests: the controller's own defaults
	// (--kube-api-qps 50, --kube-api-burst 300) instead.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = planQPS, planBurst
	}
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	return cfg, ns, nil
}

func write(w io.Writer, pv *preview.Preview, o *options, terminal bool) error {
	if o.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(pv)
	}
	if o.output == "markdown" {
		if err := preview.WriteMarkdown(w, o.namespace+"/"+o.name, pv); err != nil {
			return err
		}
		return preview.WriteMarkdownSettings(w, pv.Settings)
	}
	color := o.color == "always" || (o.color == "auto" && terminal)
	return preview.WriteText(w, pv, color)
}

// oneLine keeps an error on one line: Helm and the API server join
// several with newlines.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
