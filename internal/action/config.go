package action

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	helmaction "helm.sh/helm/v4/pkg/action"
	helmkube "helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/helmclient"
	"github.com/afterhooks/helm-controller/internal/jobttl"
	"github.com/afterhooks/helm-controller/internal/storagedriver"
)

// DefaultFieldManager is the field manager Helm applies objects with.
const DefaultFieldManager = "helm-controller"

// ConfigFactory makes Helm action configurations for HelmReleases that share
// one cluster connection (one RESTClientGetter).
type ConfigFactory struct {
	getter    genericclioptions.RESTClientGetter
	clientSet kubernetes.Interface
	// metadata lists release records without their data.
	metadata     metadata.Interface
	fieldManager string
	// clusters is shared with every factory made by ForGetter: what Helm
	// would otherwise work out per action is kept per API server.
	clusters *helmclient.Clusters
	// fieldValidation is clusters' entry for this factory's API server.
	fieldValidation *helmclient.FieldValidation
	// jobs is clusters' tracker of the self-deleting Jobs applied to this
	// factory's API server.
	jobs *jobttl.Tracker
	// decoded keeps the release records read, shared with every factory
	// made by ForGetter: a reconcile that finds the record unchanged does
	// not decode it again.
	decoded *storagedriver.Decoded
}

// FactoryOption configures a ConfigFactory.
type FactoryOption func(*ConfigFactory)

// WithFieldManager sets the field manager Helm writes objects with; the
// default is DefaultFieldManager. Helm only has a process-wide setting for
// it (helm's kube.ManagedFieldsManager), so the last factory created wins.
func WithFieldManager(name string) FactoryOption {
	return func(f *ConfigFactory) {
		f.fieldManager = name
	}
}

// NewConfigFactory returns a factory for the cluster reached through getter.
// The getter's discovery client and REST mapper are shared by every
// configuration the factory builds, so they should cache (as the getter of
// NewConfigFactoryFromRESTConfig does).
func NewConfigFactory(getter genericclioptions.RESTClientGetter, opts ...FactoryOption) (*ConfigFactory, error) {
	if getter == nil {
		return nil, errors.New("action: nil RESTClientGetter")
	}
	f := &ConfigFactory{getter: getter, fieldManager: DefaultFieldManager, clusters: helmclient.NewClusters(),
		decoded: storagedriver.NewDecoded(storagedriver.DefaultDecodedBudget)}
	for _, o := range opts {
		o(f)
	}
	if f.fieldManager == "" {
		return nil, errors.New("action: empty field manager")
	}
	if err := f.connect(); err != nil {
		return nil, err
	}
	helmkube.ManagedFieldsManager = f.fieldManager
	return f, nil
}

// connect makes the factory's clientset and finds its cluster's shared
// caches.
func (f *ConfigFactory) connect() error {
	restCfg, err := f.getter.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("action: REST config: %w", err)
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("action: Kubernetes client: %w", err)
	}
	f.clientSet = cs
	if f.metadata, err = metadata.NewForConfig(restCfg); err != nil {
		return fmt.Errorf("action: metadata client: %w", err)
	}
	f.fieldValidation = f.clusters.FieldValidation(restCfg.Host)
	f.jobs = f.clusters.Jobs(restCfg.Host)
	return nil
}

// NewConfigFactoryFromRESTConfig is NewConfigFactory for a *rest.Config,
// with a getter that caches discovery in memory.
func NewConfigFactoryFromRESTConfig(cfg *rest.Config, opts ...FactoryOption) (*ConfigFactory, error) {
	if cfg == nil {
		return nil, errors.New("action: nil REST config")
	}
	return NewConfigFactory(NewRESTClientGetter(cfg), opts...)
}

// ForGetter returns a factory for another cluster connection (a remote
// cluster or an impersonated identity: see internal/connect) with this
// factory's field manager. Unlike NewConfigFactory it leaves Helm's
// process-wide field manager alone, so it is safe while actions run.
func (f *ConfigFactory) ForGetter(getter genericclioptions.RESTClientGetter) (*ConfigFactory, error) {
	if getter == nil {
		return nil, errors.New("action: nil RESTClientGetter")
	}
	other := &ConfigFactory{getter: getter, fieldManager: f.fieldManager, clusters: f.clusters, decoded: f.decoded}
	if err := other.connect(); err != nil {
		return nil, err
	}
	return other, nil
}

// RESTClientGetter returns the getter the factory was made with.
func (f *ConfigFactory) RESTClientGetter() genericclioptions.RESTClientGetter {
	return f.getter
}

// FieldManager returns the field manager objects are applied with.
func (f *ConfigFactory) FieldManager() string {
	return f.fieldManager
}

// ConfigOption configures one Build.
type ConfigOption func(*configOptions)

type configOptions struct {
	handler    slog.Handler
	wrapDriver func(driver.Driver) driver.Driver
	hookOrigin string
}

// HookMarks is the mark the kube client puts on the hook objects of obj's
// release when obj asks for them to be deleted on uninstall
// (spec.uninstall.deleteHookResources): that cleanup deletes only objects
// with the mark (see internal/hookcleanup). Empty otherwise: hook objects
// are then created exactly as Helm creates them.
func HookMarks(obj *v2.HelmRelease) string {
	if obj == nil || !obj.GetUninstall().DeleteHookResources {
		return ""
	}
	return hookOrigin(obj)
}

// WithHookMarks makes the kube client mark the hook objects it creates
// with origin (see HookMarks); empty marks nothing.
func WithHookMarks(origin string) ConfigOption {
	return func(o *configOptions) {
		o.hookOrigin = origin
	}
}

// WithSlogHandler sends Helm's logs to h.
func WithSlogHandler(h slog.Handler) ConfigOption {
	return func(o *configOptions) {
		o.handler = h
	}
}

// WithStorageDriver wraps the Secret storage driver; wrap receives the
// driver Build made and returns the one Helm will use. Wrappers set by
// several options are applied in order, the last one outermost.
func WithStorageDriver(wrap func(driver.Driver) driver.Driver) ConfigOption {
	return func(o *configOptions) {
		if wrap == nil {
			return
		}
		prev := o.wrapDriver
		if prev == nil {
			o.wrapDriver = wrap
			return
		}
		o.wrapDriver = func(d driver.Driver) driver.Driver { return wrap(prev(d)) }
	}
}

// Build returns a Helm configuration whose kube client works in
// releaseNamespace and whose release records are Secrets in
// storageNamespace.
func (f *ConfigFactory) Build(storageNamespace, releaseNamespace string, opts ...ConfigOption) (*helmaction.Configuration, error) {
	if storageNamespace == "" || releaseNamespace == "" {
		return nil, fmt.Errorf("action: storage namespace (%q) and release namespace (%q) are required", storageNamespace, releaseNamespace)
	}
	o := configOptions{handler: slog.DiscardHandler}
	for _, opt := range opts {
		opt(&o)
	}

	kc := helmclient.NewClient(f.getter, f.fieldValidation)
	kc.Namespace = releaseNamespace
	kc.HookOrigin = o.hookOrigin
	kc.Jobs = f.jobs
	kc.SetLogger(o.handler)

	secrets := storagedriver.NewSecrets(f.clientSet.CoreV1().Secrets(storageNamespace)).WithDecoded(f.decoded).
		WithMetadata(f.metadata.Resource(corev1.SchemeGroupVersion.WithResource("secrets")).Namespace(storageNamespace))
	secrets.SetLogger(o.handler)
	var d driver.Driver = secrets
	if o.wrapDriver != nil {
		if d = o.wrapDriver(d); d == nil {
			return nil, errors.New("action: storage driver wrapper returned nil")
		}
	}
	store := storage.Init(d)
	store.SetLogger(o.handler)

	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(o.handler))
	cfg.RESTClientGetter = f.getter
	cfg.KubeClient = kc
	cfg.Releases = store
	cfg.HookOutputFunc = func(_, _, _ string) io.Writer { return io.Discard }
	return cfg, nil
}

// NewRESTClientGetter returns a RESTClientGetter for cfg whose discovery
// client and REST mapper cache in memory; Helm invalidates and resets them
// when it installs CRDs.
func NewRESTClientGetter(cfg *rest.Config) genericclioptions.RESTClientGetter {
	return connect.NewGetter(cfg, "", true)
}
