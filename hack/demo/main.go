// Command demo shows what waitStrategy: afterHooks changes, on a throwaway
// local cluster (`make demo`):
//
//	go run ./hack/demo
//
// It installs the deadlock chart (test/e2e/framework/charts/afterhooks-deadlock:
// a Deployment mounting a Secret that only its post-install hook Job
// creates) six times side by side: Helm's default wait order, disableWait and
// afterHooks, each with healthy pods and with crash-looping pods. Once every
// HelmRelease has settled it prints what the API reports for each, next to
// how many pods are actually ready, then stops everything it started.
//
// Nothing in the table is hard-coded: outcomes, reasons and times are read
// from the HelmReleases and Deployments. The demo reuses the end-to-end test
// infrastructure (test/cluster, test/chartserver) as libraries.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/cluster"
)

const (
	namespace = "demo"
	// chartDir is reused from the e2e tests so the demo shows exactly the
	// scenario the tests prove.
	chartDir = "test/e2e/framework/charts/afterhooks-deadlock"
	// installTimeout is short so the deadlock shows within the demo; the
	// default (5m) would make it wait that long.
	installTimeout = 20 * time.Second
	// settleLimit bounds the watch: a timeout plus the hook plus source
	// fetching fits well inside it.
	settleLimit = 60 * time.Second
	crashloop   = `{"podAnnotations":{"sim.afterhooks.io/fail":"crashloop"}}`
)

// release is one row of the demo: a wait strategy and a pod behaviour.
type release struct {
	name, strategy, variant string
	install                 v2.Install
	values                  string

	// Filled in by watch.
	settled time.Duration // 0 while not settled
	ready   *metav1.Condition
}

func main() {
	began := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	if ctx.Err() != nil {
		step(fmt.Sprintf("interrupted; everything it started is stopped (%s)", time.Since(began).Round(time.Second)))
		os.Exit(130)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	step(fmt.Sprintf("everything stopped; total %s", time.Since(began).Round(time.Second)))
}

func run(ctx context.Context) (err error) {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	// The work directory outlives the demo so the controller log can be read
	// afterwards; only the binary is removed.
	workDir, err := os.MkdirTemp("", "helm-controller-demo-*")
	if err != nil {
		return err
	}
	binary := filepath.Join(workDir, "helm-controller")
	defer os.Remove(binary)

	c, err := buildAndStartCluster(ctx, root, binary)
	if err != nil {
		return err
	}
	defer stopCluster(c)

	charts, err := chartserver.Start(ctx)
	if err != nil {
		return fmt.Errorf("starting the chart server: %w", err)
	}
	defer charts.Close()
	chart, err := charts.AddChart(filepath.Join(root, chartDir))
	if err != nil {
		return fmt.Errorf("publishing the chart: %w", err)
	}

	logPath := filepath.Join(workDir, "controller.log")
	ctrl, err := startController(binary, c.Kubeconfig(), logPath)
	if err != nil {
		return err
	}
	defer func() {
		// After Ctrl-C an install cut short makes a non-zero exit normal, so
		// it is only reported, not turned into the demo's error.
		if stopErr := ctrl.stop(); stopErr != nil && ctx.Err() == nil {
			err = errors.Join(err, stopErr)
		} else if stopErr != nil {
			step(stopErr.Error())
		}
	}()
	step("controller running; log: " + logPath)

	if err := installAndReport(ctx, c, ctrl, charts.HelmRepositoryURL(), chart); err != nil {
		return err
	}
	step("stopping the controller, chart server and cluster")
	return nil
}

// buildAndStartCluster builds the controller into binary and starts the
// local cluster. Both take similar time, so they run side by side. On
// error nothing is left running.
func buildAndStartCluster(ctx context.Context, root, binary string) (*cluster.Cluster, error) {
	step("building the controller and starting a local cluster (kwok + workload simulator)")
	built := make(chan error, 1)
	go func() {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", binary, ".")
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
		built <- cmd.Run()
	}()
	c, clusterErr := cluster.Start(ctx, cluster.Options{
		Name:         "demo",
		ExtraCRDDirs: []string{filepath.Join(root, "config", "crd", "bases")},
	})
	if err := <-built; err != nil {
		if clusterErr == nil {
			stopCluster(c)
		}
		return nil, fmt.Errorf("building the controller: %w", err)
	}
	if clusterErr != nil {
		return nil, clusterErr
	}
	return c, nil
}

// installAndReport creates the demo's HelmReleases of chart, watches the
// controller install them and prints the outcome of each.
func installAndReport(ctx context.Context, c *cluster.Cluster, ctrl *controller, repoURL string, chart chartserver.ChartRef) error {
	kube, err := client.New(c.RESTConfig(), client.Options{Scheme: newScheme()})
	if err != nil {
		return fmt.Errorf("creating the client: %w", err)
	}
	releases := demoReleases()
	if err := create(ctx, kube, repoURL, chart, releases); err != nil {
		return err
	}
	step(fmt.Sprintf("installing %d HelmReleases of %s in namespace %s (install.timeout %s, remediation.retries 0)",
		len(releases), chart.Name, namespace, installTimeout))
	if err := watch(ctx, kube, ctrl, releases); err != nil {
		return err
	}
	return printTable(ctx, kube, releases)
}

// demoReleases is the matrix: every strategy with healthy and crash-looping
// pods. Every release gets remediation.retries 0 so a failure shows as
// failed instead of being retried out of the demo's time window.
func demoReleases() []*release {
	base := helmv2.Install{
		Timeout:     &metav1.Duration{Duration: installTimeout},
		Remediation: &helmv2.InstallRemediation{Retries: 0},
	}
	noWait := base
	noWait.DisableWait = true
	strategies := []struct {
		name    string
		install v2.Install
	}{
		{"beforeHooks", v2.Install{Install: base}}, // the default: not set
		{"disableWait", v2.Install{Install: noWait}},
		{"afterHooks", v2.Install{Install: base, WaitStrategy: v2.AfterHooks}},
	}
	var out []*release
	for _, s := range strategies {
		for _, v := range []struct{ name, values string }{{"healthy", ""}, {"crash-loop", crashloop}} {
			out = append(out, &release{
				name:     strings.ToLower(s.name + "-" + v.name),
				strategy: s.name, variant: v.name, install: s.install, values: v.values,
			})
		}
	}
	return out
}

// create makes the namespace, one HelmRepository serving the chart, and a
// HelmRelease per row using a chart template (the common Flux setup).
func create(ctx context.Context, kube client.Client, repoURL string, chart chartserver.ChartRef, releases []*release) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
		&sourcev1.HelmRepository{
			ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: namespace},
			Spec:       sourcev1.HelmRepositorySpec{URL: repoURL, Interval: metav1.Duration{Duration: time.Minute}},
		},
	}
	for _, r := range releases {
		hr := &v2.HelmRelease{
			ObjectMeta: metav1.ObjectMeta{Name: r.name, Namespace: namespace},
			Spec: v2.HelmReleaseSpec{
				HelmReleaseSpec: helmv2.HelmReleaseSpec{
					Interval: metav1.Duration{Duration: 10 * time.Minute},
					Chart: &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
						Chart:     chart.Name,
						Version:   chart.Version,
						SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: "local"},
					}},
				},
				Install: r.install.DeepCopy(),
			},
		}
		if r.values != "" {
			hr.Spec.Values = &apiextensionsv1.JSON{Raw: []byte(r.values)}
		}
		objs = append(objs, hr)
	}
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// watch polls until every HelmRelease has settled or settleLimit passes.
// Settled means Ready=True, or Ready=False once an install was attempted
// (the history holds a revision); before that, Ready=False only says the
// chart is still being fetched.
func watch(ctx context.Context, kube client.Client, ctrl *controller, releases []*release) error {
	start := time.Now()
	deadline := time.After(settleLimit)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		pending := 0
		for _, r := range releases {
			if r.settled > 0 {
				continue
			}
			hr := &v2.HelmRelease{}
			if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: r.name}, hr); err != nil {
				return fmt.Errorf("reading HelmRelease %s: %w", r.name, err)
			}
			r.ready = apimeta.FindStatusCondition(hr.Status.Conditions, meta.ReadyCondition)
			switch {
			case r.ready == nil:
			case r.ready.Status == metav1.ConditionTrue,
				r.ready.Status == metav1.ConditionFalse && len(hr.Status.History) > 0:
				r.settled = time.Since(start)
				fmt.Fprintf(os.Stderr, "       %-24s Ready=%s %s after %s\n", r.name, r.ready.Status, r.ready.Reason, r.settled.Round(time.Second))
				continue
			}
			pending++
		}
		if pending == 0 {
			return nil
		}
		if err := ctrl.running(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-deadline:
			step(fmt.Sprintf("%d HelmRelease(s) still unsettled after %s; showing their current state", pending, settleLimit))
			return nil
		case <-tick.C:
		}
	}
}

// printTable writes one row per release: what the HelmRelease reports, and
// what the Deployment and the hook's Secret say about reality.
func printTable(ctx context.Context, kube client.Client, releases []*release) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(w, "\nstrategy\tvariant\toutcome\ttime\tpods ready\tnote")
	for _, r := range releases {
		outcome, took := "Ready=Unknown", ">"+settleLimit.String()
		if r.ready != nil {
			outcome = fmt.Sprintf("Ready=%s %s", r.ready.Status, r.ready.Reason)
		}
		if r.settled > 0 {
			took = r.settled.Round(time.Second).String()
		}
		pods, ready, want, err := podsReady(ctx, kube, r.name)
		if err != nil {
			return err
		}
		hookRan, err := exists(ctx, kube, &corev1.Secret{}, r.name+"-creds")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.strategy, r.variant, outcome, took, pods, note(r, ready, want, hookRan))
	}
	return w.Flush()
}

// note explains a row from measured facts only.
func note(r *release, ready, want int32, hookRan bool) string {
	switch {
	case r.ready == nil || r.settled == 0:
		return "(not settled)"
	case r.ready.Status == metav1.ConditionTrue && ready < want:
		return "<- reported Ready while pods are not ready"
	case r.ready.Status == metav1.ConditionFalse && !hookRan:
		return "(deadlock: post-install hook never ran)"
	case r.ready.Status == metav1.ConditionFalse:
		return "(hook ran, pods not ready: failure reported, remediation applies)"
	}
	return ""
}

// podsReady reports the Deployment's ready replicas as "ready/desired".
func podsReady(ctx context.Context, kube client.Client, name string) (string, int32, int32, error) {
	d := &appsv1.Deployment{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); apierrors.IsNotFound(err) {
		return "-", 0, 0, nil
	} else if err != nil {
		return "", 0, 0, fmt.Errorf("reading Deployment %s: %w", name, err)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, want), d.Status.ReadyReplicas, want, nil
}

func exists(ctx context.Context, kube client.Client, obj client.Object, name string) (bool, error) {
	err := kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// controller is the helm-controller binary run as a user would, like the
// e2e tests do.
type controller struct {
	cmd    *exec.Cmd
	exited chan error
}

func startController(binary, kubeconfig, logPath string) (*controller, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary,
		"--kubeconfig="+kubeconfig,
		"--watch-all-namespaces",
		"--enable-leader-election=false",
		"--metrics-addr=127.0.0.1:0",
		"--health-addr=127.0.0.1:0",
		"--events-addr=",
		"--log-encoding=console",
		// In-flight installs wait up to their timeout on shutdown; the demo
		// should stop promptly instead.
		"--graceful-shutdown-timeout=5s",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "RUNTIME_NAMESPACE=flux-system")
	// Its own process group keeps Ctrl-C away from it, so it gets the orderly
	// SIGTERM below; Pdeathsig still kills it if the demo itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the controller: %w", err)
	}
	c := &controller{cmd: cmd, exited: make(chan error, 1)}
	go func() {
		c.exited <- cmd.Wait()
		logFile.Close()
	}()
	return c, nil
}

// running reports an error once the controller has exited.
func (c *controller) running() error {
	select {
	case err := <-c.exited:
		c.exited <- err
		return fmt.Errorf("controller exited: %v", err)
	default:
		return nil
	}
}

// stop sends SIGTERM and waits for a clean exit, killing after 30s.
func (c *controller) stop() error {
	if err := c.running(); err != nil {
		return err
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.exited:
		if err != nil {
			return fmt.Errorf("controller exited with %v", err)
		}
		return nil
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		return errors.New("controller did not stop within 30s of SIGTERM")
	}
}

func stopCluster(c *cluster.Cluster) {
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "demo: stopping the cluster:", err)
	}
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, v2.AddToScheme, sourcev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// moduleRoot finds the repository root (the directory holding go.mod) so the
// demo works from any directory inside the checkout.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, chartDir)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run the demo inside the helm-controller checkout (%s not found)", chartDir)
		}
		dir = parent
	}
}

func step(msg string) { fmt.Fprintf(os.Stderr, "demo: %s\n", msg) }
