// Command helm-controller is a drop-in replacement for Flux's helm-controller
// that adds waitStrategy: afterHooks. It accepts every flag of upstream
// helm-controller v1.6.x with the same names and defaults.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/auth"
	pkgcache "github.com/fluxcd/pkg/cache"
	"github.com/fluxcd/pkg/runtime/acl"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	helper "github.com/fluxcd/pkg/runtime/controller"
	"github.com/fluxcd/pkg/runtime/events"
	feathelper "github.com/fluxcd/pkg/runtime/features"
	"github.com/fluxcd/pkg/runtime/jitter"
	"github.com/fluxcd/pkg/runtime/leaderelection"
	"github.com/fluxcd/pkg/runtime/logger"
	"github.com/fluxcd/pkg/runtime/metrics"
	"github.com/fluxcd/pkg/runtime/pprof"
	"github.com/fluxcd/pkg/runtime/probes"
	"github.com/go-logr/logr"
	"github.com/opencontainers/go-digest"
	"github.com/spf13/pflag"

	// Trusted CA roots compiled in, used only when the system has none: the
	// image carries no CA bundle, yet must verify HTTPS and OCI registries.
	_ "golang.org/x/crypto/x509roots/fallback"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrlcfg "sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/controller"
	"github.com/afterhooks/helm-controller/internal/crdguard"
	"github.com/afterhooks/helm-controller/internal/features"
	"github.com/afterhooks/helm-controller/internal/oomwatch"
	"github.com/afterhooks/helm-controller/internal/plancmd"
	"github.com/afterhooks/helm-controller/internal/recreate"
	"github.com/afterhooks/helm-controller/internal/scheme"
	"github.com/afterhooks/helm-controller/internal/served"
)

// version is stamped at build time (-ldflags "-X main.version=…", see
// hack/version.sh). Left empty by a plain `go build` or `go install`, it is
// taken from the build information instead (see buildVersion).
var version = ""

// options holds every command-line setting.
type options struct {
	metricsAddr                     string
	eventsAddr                      string
	healthAddr                      string
	concurrent                      int
	requeueDependency               time.Duration
	gracefulShutdownTimeout         time.Duration
	httpRetry                       int
	httpTimeout                     time.Duration
	defaultServiceAccount           string
	defaultKubeConfigServiceAccount string
	snapshotDigestAlgo              string
	overrideManagers                []string
	oomWatchInterval                time.Duration
	oomWatchMemoryThreshold         uint8
	oomWatchMaxMemoryPath           string
	oomWatchCurrentMemoryPath       string
	tokenCacheMaxSize               int
	tokenCacheMaxDuration           time.Duration

	client         runtimeclient.Options
	kubeConfig     runtimeclient.KubeConfigOptions
	logger         logger.Options
	acl            acl.Options
	leaderElection leaderelection.Options
	rateLimiter    helper.RateLimiterOptions
	watch          helper.WatchOptions
	intervalJitter jitter.IntervalOptions
	featureGates   feathelper.FeatureGates
}

// bindFlags registers every flag on fs.
func (o *options) bindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.metricsAddr, "metrics-addr", ":8080", "Listen address of the Prometheus metrics endpoint.")
	fs.StringVar(&o.eventsAddr, "events-addr", "", "URL of notification-controller's event receiver; empty disables forwarding.")
	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "Listen address of the /healthz and /readyz endpoints.")
	fs.IntVar(&o.concurrent, "concurrent", 4, "How many HelmReleases are reconciled at the same time.")
	fs.DurationVar(&o.requeueDependency, "requeue-dependency", 30*time.Second, "How long to wait before checking again a HelmRelease whose dependencies are not ready.")
	fs.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", 600*time.Second,
		"How long running reconciles may take to finish after a shutdown signal before the process stops anyway.")
	fs.IntVar(&o.httpRetry, "http-retry", 9, "How many times a failed chart artifact download is retried.")
	fs.DurationVar(&o.httpTimeout, "http-timeout", 30*time.Second, "Time limit of a single chart artifact download attempt.")
	fs.StringVar(&o.defaultServiceAccount, "default-service-account", "", "ServiceAccount to impersonate for HelmReleases that set no spec.serviceAccountName.")
	fs.StringVar(&o.defaultKubeConfigServiceAccount, "default-kubeconfig-service-account", "",
		"ServiceAccount used for remote-cluster kubeconfigs that name none.")
	fs.StringVar(&o.snapshotDigestAlgo, "snapshot-digest-algo", "sha256",
		"Hash algorithm (sha256, sha384, sha512, blake3) of the release digests kept in status.history.")
	fs.StringArrayVar(&o.overrideManagers, "override-manager", nil,
		"A field manager whose changes drift correction takes over (repeatable), e.g. kubectl-edit.")
	fs.DurationVar(&o.oomWatchInterval, "oom-watch-interval", 500*time.Millisecond,
		"How often memory usage is sampled when the OOMWatch feature gate is on.")
	fs.Uint8Var(&o.oomWatchMemoryThreshold, "oom-watch-memory-threshold", 95,
		"Memory usage, in percent of the limit, at which the OOMWatch feature gate shuts the controller down gracefully.")
	fs.StringVar(&o.oomWatchMaxMemoryPath, "oom-watch-max-memory-path", "",
		"cgroup file holding the memory limit, for OOMWatch; detected when empty.")
	fs.StringVar(&o.oomWatchCurrentMemoryPath, "oom-watch-current-memory-path", "",
		"cgroup file holding the current memory usage, for OOMWatch; detected when empty.")
	fs.IntVar(&o.tokenCacheMaxSize, "token-cache-max-size", 100,
		"Capacity of the cache of cloud provider tokens; 0 disables the cache.")
	fs.DurationVar(&o.tokenCacheMaxDuration, "token-cache-max-duration", time.Hour,
		"Longest time a cached token is reused (at most 1h).")

	o.client.BindFlags(fs)
	o.kubeConfig.BindFlags(fs)
	o.logger.BindFlags(fs)
	o.acl.BindFlags(fs)
	o.leaderElection.BindFlags(fs)
	o.rateLimiter.BindFlags(fs)
	o.watch.BindFlags(fs)
	o.intervalJitter.BindFlags(fs)
	o.featureGates.BindFlags(fs)

	// controller-runtime registers --kubeconfig on Go's flag set.
	if f := goflag.CommandLine.Lookup("kubeconfig"); f != nil {
		fs.AddGoFlag(f)
	}
}

// Exit codes, as upstream's: flags that cannot be parsed exit 2 (the error
// goes to stderr, as pflag's own handling would print it), every other start-up error exits 1
// after the logger has written it.
const (
	exitStartFailed = 1
	exitUsage       = 2
)

func main() {
	// The plan subcommand previews a reconcile (docs/plan.md); the
	// manager's own flags and behaviour stay exactly as upstream's.
	if len(os.Args) > 1 && os.Args[1] == "plan" {
		os.Exit(runPlan(os.Args[2:]))
	}
	err := run(os.Args[1:])
	if err == nil {
		return
	}
	if errors.Is(err, errUsage) {
		// pflag returns the error without printing it (ContinueOnError).
		fmt.Fprintln(os.Stderr, err)
		os.Exit(exitUsage)
	}
	// The logger is set up right after the flags are parsed, so the error
	// reaches it in the configured encoding (JSON by default), as
	// upstream's start-up errors do.
	ctrl.Log.WithName("setup").Error(err, "unable to start the controller")
	os.Exit(exitStartFailed)
}

// runPlan runs `helm-controller plan` until it is done or interrupted
// and returns its exit code.
func runPlan(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	info, err := os.Stdout.Stat()
	terminal := err == nil && info.Mode()&os.ModeCharDevice != 0
	// The command prints its own output and errors; controller-runtime's
	// client logs nothing a user needs, and without a logger it prints a
	// stack trace once the process is 30 s old (a plan of a large chart).
	ctrl.SetLogger(logr.Discard())
	return plancmd.RunWithStdin(ctx, args, os.Stdin, os.Stdout, os.Stderr, terminal)
}

// setLogger makes the logger of opts controller-runtime's and, as
// upstream, client-go's (klog: reflector and watch errors, throttling), so
// every line comes out in the chosen encoding for log collectors and
// `flux logs`.
func setLogger(opts options) {
	logger.SetLogger(logger.NewLogger(opts.logger))
}

// errUsage marks command-line arguments pflag could not parse.
var errUsage = errors.New("invalid command-line arguments")

func run(args []string) error {
	var opts options
	fs := pflag.NewFlagSet("helm-controller", pflag.ContinueOnError)
	opts.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}

	setLogger(opts)
	log := ctrl.Log.WithName("setup")
	log.Info("helm-controller with waitStrategy: afterHooks", "version", buildVersion(version, readBuildInfo))

	if err := validate(&opts); err != nil {
		return err
	}

	// Before connecting to a cluster, so a bad cgroup path is reported as
	// an argument error.
	ctx, err := watchMemory(ctrl.SetupSignalHandler(), &opts, log)
	if err != nil {
		return err
	}
	restConfig := runtimeclient.GetConfigOrDie(opts.client)
	if err := checkServedKinds(restConfig, newReconciler(&opts)); err != nil {
		return err
	}
	mgr, err := newManager(&opts, restConfig)
	if err != nil {
		return err
	}
	if err := setupReconciler(ctx, mgr, &opts, log); err != nil {
		return err
	}

	probes.SetupChecks(mgr, log)
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	if cause := context.Cause(ctx); errors.Is(cause, oomwatch.ErrNearOOM) {
		log.Info("stopped before running out of memory", "cause", cause.Error())
	}
	return nil
}

// watchMemory returns the context the manager runs under. With the OOMWatch
// feature gate it is also cancelled when memory usage nears the cgroup
// limit, which shuts the manager down exactly as SIGTERM does (see
// docs/operations.md). Without a memory limit there is nothing to guard
// against and ctx is returned as it is.
func watchMemory(ctx context.Context, opts *options, log logr.Logger) (context.Context, error) {
	if !features.Enabled(features.OOMWatch) {
		return ctx, nil
	}
	w, err := oomwatch.New(oomwatch.Options{
		LimitPath:        opts.oomWatchMaxMemoryPath,
		UsagePath:        opts.oomWatchCurrentMemoryPath,
		ThresholdPercent: opts.oomWatchMemoryThreshold,
		Interval:         opts.oomWatchInterval,
		Log:              ctrl.Log.WithName("oom-watch"),
	})
	if errors.Is(err, oomwatch.ErrNoLimit) {
		log.Info("OOMWatch is enabled but the memory cgroup sets no limit: nothing to watch", "reason", err.Error())
		return ctx, nil
	}
	if err != nil {
		return nil, fmt.Errorf("setting up the OOM watch: %w", err)
	}
	log.Info("watching memory usage", "limitFile", w.LimitPath(), "usageFile", w.UsagePath(),
		"thresholdPercent", opts.oomWatchMemoryThreshold, "interval", opts.oomWatchInterval.String())
	return w.Watch(ctx), nil
}

// validate checks option values that flag parsing cannot.
func validate(opts *options) error {
	if err := features.Load(&opts.featureGates); err != nil {
		return fmt.Errorf("invalid --feature-gates: %w", err)
	}
	if features.Enabled(features.AdoptLegacyReleases) {
		ctrl.Log.WithName("setup").Info("the AdoptLegacyReleases feature gate is ignored, as in upstream helm-controller")
	}
	// As upstream: a default kubeconfig ServiceAccount is refused at
	// start-up unless the gate that lets it be used is on.
	if opts.defaultKubeConfigServiceAccount != "" && !features.Enabled(features.ObjectLevelWorkloadIdentity) {
		return fmt.Errorf("invalid configuration: %w", auth.ErrInconsistentObjectLevelConfiguration)
	}
	if opts.concurrent < 1 {
		return fmt.Errorf("--concurrent must be at least 1, got %d", opts.concurrent)
	}
	if !slices.Contains([]string{"sha256", "sha384", "sha512", "blake3"}, opts.snapshotDigestAlgo) {
		return fmt.Errorf("--snapshot-digest-algo: unsupported algorithm %q (use sha256, sha384, sha512 or blake3)", opts.snapshotDigestAlgo)
	}
	if opts.oomWatchMemoryThreshold == 0 || opts.oomWatchMemoryThreshold > 100 {
		return fmt.Errorf("--oom-watch-memory-threshold must be between 1 and 100, got %d", opts.oomWatchMemoryThreshold)
	}
	if err := opts.intervalJitter.SetGlobalJitter(nil); err != nil {
		return fmt.Errorf("invalid --interval-jitter-percentage: %w", err)
	}
	if _, err := helper.GetWatchSelector(opts.watch); err != nil {
		return fmt.Errorf("invalid --watch-label-selector: %w", err)
	}
	return nil
}

// defaultHookOrder is the hook order (waitStrategy) of install, upgrade
// and rollback for HelmReleases that leave it unset: afterHooks with the
// DefaultToAfterHooks feature gate, else Helm's order.
func defaultHookOrder(defaultToAfterHooks bool) v2.HookWaitStrategy {
	if defaultToAfterHooks {
		return v2.AfterHooks
	}
	return v2.BeforeHooks
}

func newScheme() *runtime.Scheme { return scheme.New() }

// checkServedKinds fails when the API server does not serve a kind the
// reconciler watches, naming its CRD. The manager would fail too, but
// later and without naming it: at creation for HelmReleases, whose cache
// needs their scope, and for the others when its cache sync times out.
func checkServedKinds(cfg *rest.Config, r *controller.HelmReleaseReconciler) error {
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return fmt.Errorf("creating the HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return fmt.Errorf("creating the REST mapper: %w", err)
	}
	return served.Check(mapper, newScheme(), r.WatchedKinds())
}

func newManager(opts *options, restConfig *rest.Config) (ctrl.Manager, error) {
	mgrOpts, err := managerOptions(opts)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, nil
}

// managerOptions is what flags and feature gates make of the manager: its
// caches, leader election and shutdown. It needs no cluster, so tests can
// inspect it.
func managerOptions(opts *options) (ctrl.Options, error) {
	watchSelector, err := helper.GetWatchSelector(opts.watch)
	if err != nil {
		return ctrl.Options{}, fmt.Errorf("invalid --watch-label-selector: %w", err)
	}

	cacheOpts := ctrlcache.Options{
		ByObject: map[ctrlclient.Object]ctrlcache.ByObject{
			// Without managedFields: nothing reads them, and every status
			// write diffs (and every cached read copies) the whole object.
			&v2.HelmRelease{}: {Label: watchSelector, Transform: ctrlcache.TransformStripManagedFields()},
		},
	}
	if !opts.watch.AllNamespaces {
		namespace := os.Getenv("RUNTIME_NAMESPACE")
		if namespace == "" {
			return ctrl.Options{}, fmt.Errorf("--watch-all-namespaces=false needs the RUNTIME_NAMESPACE environment variable")
		}
		cacheOpts.DefaultNamespaces = map[string]ctrlcache.Config{namespace: {}}
	}

	// Secrets and ConfigMaps are read directly unless caching them is
	// asked for: caching means cluster-wide list/watch and more memory.
	cacheConfigs := features.Enabled(helper.FeatureGateCacheSecretsAndConfigMaps)
	var disableCacheFor []ctrlclient.Object
	if !cacheConfigs {
		disableCacheFor = []ctrlclient.Object{&corev1.Secret{}, &corev1.ConfigMap{}}
	}

	// ConfigMaps and Secrets used in spec.valuesFrom are watched through
	// metadata informers. Restricting those informers to the selected labels
	// keeps the controller from listing every Secret of the cluster. The
	// cache configures informers per GVK, typed and metadata alike, so with
	// CacheSecretsAndConfigMaps the restriction would hide unlabelled objects
	// from cached reads; then everything is cached and the watch predicate
	// alone applies the selector.
	configWatch, err := controller.NewConfigWatchOptions(opts.watch.ConfigsLabelSelector,
		features.Enabled(helper.FeatureGateDisableConfigWatchers))
	if err != nil {
		return ctrl.Options{}, err
	}
	if configWatch.Enabled() && !configWatch.Selector.Empty() && !cacheConfigs {
		for _, kind := range []string{"ConfigMap", "Secret"} {
			obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: kind}}
			cacheOpts.ByObject[obj] = ctrlcache.ByObject{Label: configWatch.Selector}
		}
	}

	return ctrl.Options{
		Scheme:                        newScheme(),
		Metrics:                       metricsserver.Options{BindAddress: opts.metricsAddr, ExtraHandlers: pprof.GetHandlers()},
		HealthProbeBindAddress:        opts.healthAddr,
		LeaderElection:                opts.leaderElection.Enable,
		LeaderElectionReleaseOnCancel: opts.leaderElection.ReleaseOnCancel,
		LeaseDuration:                 &opts.leaderElection.LeaseDuration,
		RenewDeadline:                 &opts.leaderElection.RenewDeadline,
		RetryPeriod:                   &opts.leaderElection.RetryPeriod,
		LeaderElectionID:              leaderElectionID(opts.watch.LabelSelector),
		// In a pod the namespace is detected; outside one (make run, tests)
		// the lease lives in RUNTIME_NAMESPACE.
		LeaderElectionNamespace: os.Getenv("RUNTIME_NAMESPACE"),
		GracefulShutdownTimeout: &opts.gracefulShutdownTimeout,
		Logger:                  ctrl.Log,
		Cache:                   cacheOpts,
		Client:                  ctrlclient.Options{Cache: &ctrlclient.CacheOptions{DisableFor: disableCacheFor}},
		Controller:              ctrlcfg.Controller{RecoverPanic: ptr.To(true)},
	}, nil
}

// leaderElectionID names the Lease exactly as upstream helm-controller
// does: while one replaces the other (an image swap rolls pods), old and new
// replicas then compete for the same Lease and never run side by side. Each
// shard (--watch-label-selector) gets a Lease of its own.
func leaderElectionID(watchLabelSelector string) string {
	id := controller.ControllerName + "-leader-election"
	if watchLabelSelector == "" {
		return id
	}
	return leaderelection.GenerateID(id, watchLabelSelector)
}

func setupReconciler(ctx context.Context, mgr ctrl.Manager, opts *options, log logr.Logger) error {
	recorder, err := events.NewRecorder(ctrl.Log, opts.eventsAddr, controller.ControllerName, events.WithManager(mgr))
	if err != nil {
		return fmt.Errorf("creating event recorder for --events-addr %q: %w", opts.eventsAddr, err)
	}

	metricsRecorder := metrics.NewRecorder()
	ctrlmetrics.Registry.MustRegister(metricsRecorder.Collectors()...)

	charts := chartsource.New(chartsource.Options{
		Retries:      opts.httpRetry,
		Timeout:      opts.httpTimeout,
		HostOverride: os.Getenv("SOURCE_CONTROLLER_LOCALHOST"),
	})
	charts.MustRegisterMetrics(ctrlmetrics.Registry)
	controller.MustRegisterMetrics(ctrlmetrics.Registry)
	guard, err := crdguard.New(mgr.GetConfig(), ctrlmetrics.Registry, ctrl.Log)
	if err != nil {
		return err
	}
	if err := mgr.Add(guard); err != nil {
		return fmt.Errorf("adding the CRD guard: %w", err)
	}
	helmFactory, err := action.NewConfigFactoryFromRESTConfig(mgr.GetConfig(), action.WithFieldManager(controller.ControllerName))
	if err != nil {
		return fmt.Errorf("setting up Helm: %w", err)
	}
	targets, err := newTargetBuilder(mgr, opts)
	if err != nil {
		return err
	}

	reconciler := newReconciler(opts)
	reconciler.Client = mgr.GetClient()
	reconciler.APIReader = mgr.GetAPIReader()
	metadataClient, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating the metadata client: %w", err)
	}
	reconciler.SetMetadataClient(metadataClient)
	reconciler.EventRecorder = recorder
	reconciler.Metrics = helper.NewMetrics(mgr, metricsRecorder, helmv2.HelmReleaseFinalizer)
	reconciler.Charts = charts
	reconciler.Helm = helmFactory
	reconciler.Targets = targets
	if features.Enabled(features.DetectDrift) || features.Enabled(features.CorrectDrift) {
		// As upstream v1.x: the gates are accepted and do nothing.
		log.Info("the DetectDrift and CorrectDrift feature gates have no effect; set spec.driftDetection.mode on the HelmRelease instead")
	}
	err = reconciler.SetupWithManager(ctx, mgr, controller.HelmReleaseReconcilerOptions{
		RateLimiter:             helper.GetRateLimiter(opts.rateLimiter),
		MaxConcurrentReconciles: opts.concurrent,
	})
	if err != nil {
		return fmt.Errorf("setting up the HelmRelease controller: %w", err)
	}
	log.Info("HelmRelease controller set up", "concurrent", opts.concurrent)
	return nil
}

// configureProviderAuth hands the ObjectLevelWorkloadIdentity gate to the
// provider authentication library, which keeps it process-wide.
func configureProviderAuth(_ *options) {
	if features.Enabled(features.ObjectLevelWorkloadIdentity) {
		auth.EnableObjectLevelWorkloadIdentity()
	} else {
		auth.DisableObjectLevelWorkloadIdentity()
	}
}

// newTargetBuilder sets up the per-release cluster connections: remote
// kubeconfigs (--insecure-kubeconfig-*), impersonation
// (--default-service-account) and provider authentication of
// kubeConfig.configMapRef (--default-kubeconfig-service-account, the
// ObjectLevelWorkloadIdentity gate, the token cache).
func newTargetBuilder(mgr ctrl.Manager, opts *options) (*connect.Builder, error) {
	configureProviderAuth(opts)
	// The provider library's own default account is for workload identity;
	// --default-service-account here means impersonation, so only the
	// kubeconfig default is handed over (validate has checked its gate).
	auth.SetDefaultKubeConfigServiceAccount(opts.defaultKubeConfigServiceAccount)

	var tokenCache *pkgcache.TokenCache
	if opts.tokenCacheMaxSize > 0 {
		var err error
		tokenCache, err = pkgcache.NewTokenCache(opts.tokenCacheMaxSize,
			pkgcache.WithMaxDuration(opts.tokenCacheMaxDuration),
			pkgcache.WithMetricsRegisterer(ctrlmetrics.Registry),
			pkgcache.WithMetricsPrefix("gotk_token_"))
		if err != nil {
			return nil, fmt.Errorf("creating the token cache (--token-cache-max-size %d): %w", opts.tokenCacheMaxSize, err)
		}
	}

	// Kubeconfigs, ServiceAccounts and token requests are read and made
	// directly: caching them would watch every ServiceAccount of the cluster.
	direct, err := ctrlclient.New(mgr.GetConfig(), ctrlclient.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the client for kubeconfigs: %w", err)
	}
	kubeConfigOpts := opts.kubeConfig
	kubeConfigOpts.UserAgent = controller.ControllerName
	return connect.NewBuilder(connect.Options{
		Local:                 mgr.GetConfig(),
		Client:                direct,
		KubeConfig:            kubeConfigOpts,
		DefaultServiceAccount: opts.defaultServiceAccount,
		TokenCache:            tokenCache,
	})
}

// newReconciler is what flags and feature gates make of the reconciler;
// setupReconciler adds the clients. It needs no cluster, so tests can
// inspect it.
func newReconciler(opts *options) *controller.HelmReleaseReconciler {
	return &controller.HelmReleaseReconciler{
		FieldManager:               controller.ControllerName,
		DisableChartDigestTracking: features.Enabled(features.DisableChartDigestTracking),
		DefaultToRetryOnFailure:    features.Enabled(features.DefaultToRetryOnFailure),
		DefaultHookOrder:           defaultHookOrder(features.Enabled(features.DefaultToAfterHooks)),
		NoCrossNamespaceRef:        opts.acl.NoCrossNamespaceRefs,
		WatchExternalArtifacts:     features.Enabled(helper.FeatureGateExternalArtifact),
		RequeueDependency:          opts.requeueDependency,
		DirectSourceFetch:          features.Enabled(helper.FeatureGateDirectSourceFetch),
		AdditiveCELDependencyCheck: features.Enabled(helper.FeatureGateAdditiveCELDependencyCheck),

		CancelHealthCheckOnNewRevision: features.Enabled(features.CancelHealthCheckOnNewRevision),
		// validate has accepted only sha256, sha384 and sha512.
		SnapshotDigestAlgorithm: digest.Algorithm(opts.snapshotDigestAlgo),
		// newManager has already rejected a bad selector.
		ConfigWatch: controller.MustConfigWatchOptions(opts.watch.ConfigsLabelSelector, features.Enabled(helper.FeatureGateDisableConfigWatchers)),
		// The plan builds its Config the same way from the gates it reads.
		ActionConfig:     action.ConfigOf(features.Enabled),
		Recreations:      recreate.NewMemory(),
		OverrideManagers: opts.overrideManagers,
	}
}
