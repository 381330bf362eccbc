// Package cluster runs a throwaway Kubernetes cluster on the local machine for
// end-to-end tests: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok (fake nodes whose pods are driven by test/simulator)
// and Flux's source-controller, all bound to 127.0.0.1 on ports of their own.
// Several clusters can run side by side; each has its own directory, ports,
// certificate authority and credentials.
//
// The binaries come from hack/tools/build.sh (`make tools`).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Defaults for Options.
const (
	DefaultName    = "afterhooks"
	DefaultTimeout = 3 * time.Minute
	defaultNodes   = 1
	maxNodes       = 20
)

// ErrStopped is what Err reports once Stop has been called.
var ErrStopped = errors.New("cluster stopped")

// Options configure Start. The zero value is usable.
type Options struct {
	// Name appears in the kubeconfig (cluster and context name) and in the
	// certificate authority's name. It must be a DNS label. Default "afterhooks".
	Name string
	// Dir receives everything the cluster writes: kubeconfig, certificates,
	// etcd data, configuration and one log file per component under logs/.
	// When empty, a new temporary directory is used and Stop removes it unless
	// KeepDir is set. A given Dir is created if needed, must not hold a
	// previous cluster, and is never removed.
	Dir     string
	KeepDir bool
	// BinDir holds the binaries built by hack/tools/build.sh. When empty, the
	// HELM_CONTROLLER_TOOLS_BIN environment variable, then the build cache.
	BinDir string
	// ExtraCRDDirs are directories whose YAML files (CustomResourceDefinitions
	// only) are installed; Start returns once they are established.
	ExtraCRDDirs []string
	// Nodes is the number of fake nodes, 1 when zero.
	Nodes int
	// Logs, when set, receives one line per start-up step with its timing.
	// Component output always goes to Dir/logs/<component>.log.
	Logs io.Writer
	// Timeout bounds Start; DefaultTimeout when zero.
	Timeout time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 {
		return o, fmt.Errorf("invalid cluster name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Nodes == 0 {
		o.Nodes = defaultNodes
	}
	if o.Nodes < 0 || o.Nodes > maxNodes {
		return o, fmt.Errorf("nodes must be between 1 and %d, got %d", maxNodes, o.Nodes)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("timeout must be positive, got %s", o.Timeout)
	}
	return o, nil
}

// Cluster is a running local cluster. Its methods are safe for concurrent use.
type Cluster struct {
	name    string
	layout  layout
	ownsDir bool
	keepDir bool
	bins    binaries
	logs    io.Writer
	nodes   []string

	ports *portSet
	ep    endpoints
	caPEM []byte
	admin *rest.Config

	// life ends, with a cause, when Stop is called or a component dies.
	life    context.Context
	endLife context.CancelCauseFunc
	simDone chan struct{}

	mu       sync.Mutex
	procs    []*process
	stopping bool
	// restarting is the process RestartAPIServer is stopping on purpose.
	restarting *process

	stopOnce sync.Once
	stopErr  error
}

// Start brings up a cluster and returns once it is ready: the API server is
// ready, the default ServiceAccount exists, every node is Ready and
// untainted, all CRDs are established and source-controller is healthy.
// ctx bounds only the start; the cluster runs until Stop. On failure nothing
// is left running and the error quotes the failing component's log.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries(opts.BinDir)
	if err != nil {
		return nil, err
	}
	c, err := newCluster(opts, bins)
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx, opts); err != nil {
		err = fmt.Errorf("starting cluster %s in %s: %w", c.name, c.layout.root, err)
		if stopErr := c.Stop(); stopErr != nil {
			err = fmt.Errorf("%w (cleaning up also failed: %v)", err, stopErr)
		}
		return nil, err
	}
	return c, nil
}

func newCluster(opts Options, bins binaries) (*Cluster, error) {
	root, owns, err := prepareDir(opts.Dir, opts.Name)
	if err != nil {
		return nil, err
	}
	life, endLife := context.WithCancelCause(context.Background())
	c := &Cluster{
		name:    opts.Name,
		layout:  layout{root: root},
		ownsDir: owns,
		keepDir: opts.KeepDir,
		bins:    bins,
		logs:    opts.Logs,
		life:    life,
		endLife: endLife,
	}
	for i := range opts.Nodes {
		c.nodes = append(c.nodes, nodeName(i))
	}
	return c, nil
}

// prepareDir returns the absolute cluster directory and whether Start made it.
func prepareDir(dir, name string) (string, bool, error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "test-cluster-"+name+"-")
		if err != nil {
			return "", false, fmt.Errorf("creating cluster directory: %w", err)
		}
		return tmp, true, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, fmt.Errorf("resolving cluster directory: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", false, fmt.Errorf("creating cluster directory: %w", err)
	}
	// A previous cluster's etcd data would be served with new certificates
	// and signing keys: a confusing mix nobody wants.
	l := layout{root: abs}
	for _, p := range []string{l.etcdData(), l.adminKubeconfig()} {
		if _, err := os.Lstat(p); err == nil {
			return "", false, fmt.Errorf("cluster directory %s already holds a cluster (%s exists); remove it first", abs, filepath.Base(p))
		}
	}
	return abs, false, nil
}

func (c *Cluster) logf(format string, args ...any) {
	if c.logs == nil {
		return
	}
	fmt.Fprintf(c.logs, "cluster %s: %s\n", c.name, fmt.Sprintf(format, args...))
}

// start runs every step; any error leaves cleanup to the caller (Stop).
func (c *Cluster) start(ctx context.Context, opts Options) error {
	began := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, opts.Timeout,
		fmt.Errorf("cluster not ready within %s", opts.Timeout))
	defer cancel()
	// A component dying during start ends the wait at once, with its log.
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	stopWatch := context.AfterFunc(c.life, func() { cancelCause(context.Cause(c.life)) })
	defer stopWatch()

	ports, err := reservePorts(endpointCount)
	if err != nil {
		return err
	}
	c.ports = ports
	if c.ep, err = newEndpoints(ports.ports); err != nil {
		return err
	}
	if err := c.writeConfig(); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func(context.Context, Options) error
	}{
		{"etcd ready", c.startEtcd},
		{"API server ready", c.startAPIServer},
		{"controllers started", c.startControllers},
		{"CRDs, nodes and source-controller ready", c.startWorkloadSide},
	}
	for _, step := range steps {
		stepBegan := time.Now()
		if err := step.run(ctx, opts); err != nil {
			return err
		}
		c.logf("%s in %s", step.name, time.Since(stepBegan).Round(time.Millisecond))
	}
	c.logf("ready in %s; kubeconfig %s", time.Since(began).Round(time.Millisecond), c.Kubeconfig())
	return nil
}

// run starts one component and records it for Stop.
func (c *Cluster) run(name string, args []string, extraEnv ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return ErrStopped
	}
	p, err := startProcess(name, c.bins.path(name), c.layout.logs(), args, c.env(extraEnv...), c.onExit)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// env isolates components from the caller's environment where it matters:
// no stray KUBECONFIG, and HOME/TMPDIR inside the cluster directory so that
// caches and ~/.kwok of one cluster never leak into another.
func (c *Cluster) env(extra ...string) []string {
	env := append(os.Environ(),
		"HOME="+c.layout.home(),
		"TMPDIR="+c.layout.tmp(),
		"KUBECONFIG=",
		"KWOK_WORKDIR="+c.layout.kwokWorkDir(),
	)
	// exec.Cmd keeps the last value of a repeated key, so these win.
	return append(env, extra...)
}

func (c *Cluster) onExit(p *process) {
	c.mu.Lock()
	expected := c.stopping || c.restarting == p
	c.mu.Unlock()
	if expected {
		return
	}
	c.endLife(p.exitError())
}

// failure decorates a start-up error with the log of the component it
// concerns, unless the component's own exit already did.
func (c *Cluster) failure(component string, err error) error {
	if cause := context.Cause(c.life); cause != nil && errors.Is(err, cause) {
		return err
	}
	path := filepath.Join(c.layout.logs(), component+".log")
	return fmt.Errorf("%s: %w; last lines of %s:\n%s", component, err, path, logTail(path, tailLines))
}

func (c *Cluster) startEtcd(ctx context.Context, _ Options) error {
	if err := c.run(binEtcd, etcdArgs(c.name, c.layout, c.ep)); err != nil {
		return err
	}
	probe := probeClient()
	err := poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, probe, c.ep.etcdURL()+"/health")
	})
	if err != nil {
		return c.failure(binEtcd, fmt.Errorf("waiting for health: %w", err))
	}
	return nil
}

func (c *Cluster) startAPIServer(ctx context.Context, _ Options) error {
	if err := c.run(binAPIServer, apiserverArgs(c.layout, c.ep)); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(c.admin)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	if err := waitAPIServerReady(ctx, client); err != nil {
		return c.failure(binAPIServer, fmt.Errorf("waiting for readiness: %w", err))
	}
	return nil
}

// startControllers starts everything that only needs a ready API server.
func (c *Cluster) startControllers(_ context.Context, _ Options) error {
	if err := c.run(binControllerManager, controllerManagerArgs(c.layout)); err != nil {
		return err
	}
	if err := c.run(binScheduler, schedulerArgs(c.layout)); err != nil {
		return err
	}
	if err := c.run(binKwok, kwokArgs(c.layout)); err != nil {
		return err
	}
	c.startSimulator()
	return nil
}

// startSimulator runs the workload simulator for the cluster's lifetime; if
// it gives up early, pods stop moving, so that counts as a component failure.
func (c *Cluster) startSimulator() {
	run := defaultWorkloads.run
	if run == nil {
		return
	}
	c.simDone = make(chan struct{})
	cfg := rest.CopyConfig(c.admin)
	go func() {
		defer close(c.simDone)
		err := run(c.life, cfg)
		if c.life.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("returned while the cluster was running")
		}
		c.endLife(fmt.Errorf("workload simulator: %w", err))
	}()
}

// startWorkloadSide installs CRDs and nodes, starts source-controller once its
// CRDs are served, and waits for everything tests rely on.
func (c *Cluster) startWorkloadSide(ctx context.Context, opts Options) error {
	client, err := kubernetes.NewForConfig(c.admin)
	if err != nil {
		return fmt.Errorf("creating client: %w", err)
	}
	crdClient, err := apiextensions.NewForConfig(c.admin)
	if err != nil {
		return fmt.Errorf("creating CRD client: %w", err)
	}
	sourceCRDs, err := readCRDDirs([]string{c.bins.sourceCRDs})
	if err != nil {
		return fmt.Errorf("reading source-controller CRDs: %w", err)
	}
	extraCRDs, err := readCRDDirs(opts.ExtraCRDDirs)
	if err != nil {
		return fmt.Errorf("reading extra CRDs: %w", err)
	}
	if err := applyCRDs(ctx, crdClient, append(sourceCRDs, extraCRDs...)); err != nil {
		return err
	}
	if err := createNodes(ctx, client, c.nodes); err != nil {
		return err
	}
	if err := waitCRDsEstablished(ctx, crdClient, sourceCRDs); err != nil {
		return err
	}
	if err := c.run(binSourceController, sourceControllerArgs(c.layout, c.ep),
		"KUBECONFIG="+c.layout.kubeconfigFor(binSourceController)); err != nil {
		return err
	}
	if err := waitCRDsEstablished(ctx, crdClient, extraCRDs); err != nil {
		return err
	}
	if err := waitDefaultServiceAccount(ctx, client); err != nil {
		return c.failure(binControllerManager, err)
	}
	if err := waitNodesReady(ctx, client, c.nodes); err != nil {
		return c.failure(binKwok, err)
	}
	probe := probeClient()
	err = poll(ctx, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		return httpOK(ctx, probe, c.ep.sourceHealthURL())
	})
	if err != nil {
		return c.failure(binSourceController, fmt.Errorf("waiting for health: %w", err))
	}
	// The artifact server starts in the background once the manager runs.
	err = poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		return httpServes(ctx, probe, c.ep.storageURL()+"/")
	})
	if err != nil {
		return c.failure(binSourceController, fmt.Errorf("waiting for the artifact server: %w", err))
	}
	return nil
}

// Stop ends every component (SIGTERM, then SIGKILL after a few seconds),
// frees the ports and removes the directory if Start created it and KeepDir
// is unset. It is safe to call more than once; later calls return the first
// call's result.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	began := time.Now()
	defer func() { c.logf("stopped in %s", time.Since(began).Round(time.Millisecond)) }()
	c.mu.Lock()
	c.stopping = true
	procs := c.procs
	c.mu.Unlock()
	c.endLife(ErrStopped)

	// Clients first, so that they do not spend their last seconds retrying
	// against a vanished API server.
	var clients, servers []*process
	for _, p := range procs {
		if storageComponents[p.name] {
			servers = append(servers, p)
		} else {
			clients = append(clients, p)
		}
	}
	errs := stopAll(clients, stopGrace)
	// etcd and the API server hold only state that is about to be deleted,
	// and on SIGTERM both wait for each other's connections to drain (over
	// 5 s measured); killing them outright loses nothing.
	errs = append(errs, stopAll(servers, 0)...)
	for _, p := range clients {
		if p.killed {
			c.logf("%s ignored SIGTERM for %s and was killed", p.name, stopGrace)
		}
	}
	if c.simDone != nil {
		<-c.simDone
	}
	if c.ports != nil {
		c.ports.release()
	}
	if c.ownsDir && !c.keepDir {
		if err := os.RemoveAll(c.layout.root); err != nil {
			errs = append(errs, fmt.Errorf("removing cluster directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// storageComponents keep the cluster's state; see stop.
var storageComponents = map[string]bool{binEtcd: true, binAPIServer: true}

// stopAll stops procs concurrently; grace 0 means SIGKILL at once.
func stopAll(procs []*process, grace time.Duration) []error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { errs[i] = p.stop(grace) })
	}
	wg.Wait()
	return errs
}

// Err reports why the cluster is no longer usable: a component exited (the
// error quotes its log), or ErrStopped after Stop. It is nil while healthy.
func (c *Cluster) Err() error {
	return context.Cause(c.life)
}

// Done is closed when the cluster stops being usable; see Err.
func (c *Cluster) Done() <-chan struct{} {
	return c.life.Done()
}

// Name is the cluster's name.
func (c *Cluster) Name() string { return c.name }

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.layout.root }

// Kubeconfig is the path of an admin (system:masters) kubeconfig file.
func (c *Cluster) Kubeconfig() string { return c.layout.adminKubeconfig() }

// RESTConfig returns a new copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// APIServerURL is the API server's https URL on 127.0.0.1.
func (c *Cluster) APIServerURL() string { return c.ep.apiserverURL() }

// SourceControllerStorageURL is where source-controller serves artifacts; it
// is also the host in the artifact URLs it writes into source statuses.
func (c *Cluster) SourceControllerStorageURL() string { return c.ep.storageURL() }

// Nodes lists the names of the fake nodes.
func (c *Cluster) Nodes() []string { return append([]string(nil), c.nodes...) }

// LogFile is the path of a component's log, e.g. LogFile("kube-apiserver").
func (c *Cluster) LogFile(component string) string {
	return filepath.Join(c.layout.logs(), component+".log")
}

// writeConfig creates the directory tree, certificates, kubeconfigs and
// component configuration.
func (c *Cluster) writeConfig() error {
	for _, d := range c.layout.dirs() {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
	}
	ca, err := newAuthority(c.name)
	if err != nil {
		return err
	}
	c.caPEM = ca.certPEM
	if err := c.writePKI(ca); err != nil {
		return err
	}
	if err := c.writeKubeconfigs(ca); err != nil {
		return err
	}
	stages, err := defaultWorkloads.stages()
	if err != nil {
		return fmt.Errorf("kwok stages: %w", err)
	}
	files := map[string][]byte{
		c.layout.config("kwok-stages.yaml"):    stages,
		c.layout.config("kube-scheduler.yaml"): []byte(schedulerConfig(c.layout)),
	}
	return writeFiles(files, 0o644)
}

func (c *Cluster) writePKI(ca *authority) error {
	serving, err := ca.issue(certSpec{
		commonName: "kube-apiserver",
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		// 10.96.0.1 is the kubernetes Service's address in serviceCIDR.
		ips:    []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
		server: true,
	})
	if err != nil {
		return err
	}
	saKey, err := newKey()
	if err != nil {
		return err
	}
	saKeyPEM, err := encodeKey(saKey)
	if err != nil {
		return err
	}
	saPubPEM, err := encodePublicKey(saKey)
	if err != nil {
		return err
	}
	if err := writeFiles(map[string][]byte{
		c.layout.pki("ca.crt"):        ca.certPEM,
		c.layout.pki("apiserver.crt"): serving.certPEM,
		c.layout.pki("sa.pub"):        saPubPEM,
	}, 0o644); err != nil {
		return err
	}
	return writeFiles(map[string][]byte{
		c.layout.pki("ca.key"):        ca.keyPEM,
		c.layout.pki("apiserver.key"): serving.keyPEM,
		c.layout.pki("sa.key"):        saKeyPEM,
	}, 0o600)
}

// Identities of the clients. Components other than the scheduler act with
// full rights: they would otherwise each need a tailored RBAC role, and a
// test cluster gains nothing from that. The scheduler's built-in role fits.
const mastersGroup = "system:masters"

func (c *Cluster) writeKubeconfigs(ca *authority) error {
	clients := []struct {
		file   string
		user   string
		groups []string
	}{
		{c.layout.adminKubeconfig(), "kubernetes-admin", []string{mastersGroup}},
		{c.layout.kubeconfigFor(binControllerManager), "system:kube-controller-manager", []string{mastersGroup}},
		{c.layout.kubeconfigFor(binScheduler), "system:kube-scheduler", nil},
		{c.layout.kubeconfigFor(binKwok), "kwok", []string{mastersGroup}},
		{c.layout.kubeconfigFor(binSourceController), "source-controller", []string{mastersGroup}},
	}
	server := c.ep.apiserverURL()
	for _, client := range clients {
		kp, err := ca.issue(certSpec{commonName: client.user, organizations: client.groups, client: true})
		if err != nil {
			return err
		}
		id := identity{user: client.user, keyPair: kp}
		if err := writeKubeconfig(client.file, c.name, server, ca.certPEM, id); err != nil {
			return err
		}
		if client.file == c.layout.adminKubeconfig() {
			c.admin = restConfig(server, ca.certPEM, id)
		}
	}
	return nil
}

func writeFiles(files map[string][]byte, perm os.FileMode) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, perm); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}
