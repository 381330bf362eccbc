package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/auth"
	authutils "github.com/fluxcd/pkg/auth/utils"
	"github.com/fluxcd/pkg/cache"
	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are the controller-wide settings every Target is built with.
type Options struct {
	// Local is the REST config of the controller's own cluster.
	Local *rest.Config
	// Client reads kubeconfig Secrets and ConfigMaps and, for provider
	// authentication, ServiceAccounts and their tokens, on the
	// controller's cluster.
	Client client.Client
	// KubeConfig carries --insecure-kubeconfig-exec and
	// --insecure-kubeconfig-tls.
	KubeConfig runtimeclient.KubeConfigOptions
	// DefaultServiceAccount is --default-service-account.
	DefaultServiceAccount string
	// TokenCache caches provider tokens of kubeConfig.configMapRef
	// (--token-cache-max-size, --token-cache-max-duration); nil disables it.
	TokenCache *cache.TokenCache
}

// Request describes the object whose release work needs a Target.
type Request struct {
	// Kind, Namespace and Name identify the object (for the token cache's
	// metrics); Namespace is also where its references and its
	// ServiceAccount live.
	Kind, Namespace, Name string
	// ReleaseNamespace is the default namespace of clients.
	ReleaseNamespace string
	// KubeConfig is spec.kubeConfig; nil means the controller's cluster.
	KubeConfig *meta.KubeConfigReference
	// ServiceAccountName is spec.serviceAccountName.
	ServiceAccountName string
	// Persistent is spec.persistentClient (default true).
	Persistent bool
}

// Target is where and as whom one HelmRelease's release work runs.
type Target struct {
	*Getter
	// Remote is set when the cluster comes from spec.kubeConfig.
	Remote bool
	// ServiceAccount is the impersonated ServiceAccount's name (in the
	// HelmRelease's namespace, on the target cluster); empty when nobody
	// is impersonated.
	ServiceAccount string
	// Cluster names the target cluster for messages.
	Cluster string
}

// Shared tells whether the target is the controller's own cluster and
// identity with a persistent client, so a connection shared by every such
// HelmRelease serves it as well.
func (t *Target) Shared() bool {
	return !t.Remote && t.ServiceAccount == "" && t.Persistent()
}

// Builder builds Targets.
type Builder struct {
	opts Options
}

// NewBuilder returns a Builder; Local and Client are required.
func NewBuilder(opts Options) (*Builder, error) {
	if opts.Local == nil || opts.Client == nil {
		return nil, errors.New("kube: the local REST config and client are required")
	}
	return &Builder{opts: opts}, nil
}

// Build returns the Target of req. Errors name the reference at fault;
// a missing Secret or ConfigMap keeps its NotFound error in the chain
// (apierrors.IsNotFound).
func (b *Builder) Build(ctx context.Context, req Request) (*Target, error) {
	t := &Target{Cluster: "the controller's cluster"}
	cfg := rest.CopyConfig(b.opts.Local)
	if kc := req.KubeConfig; kc != nil {
		remote, cluster, err := b.remoteConfig(ctx, req, kc)
		if err != nil {
			return nil, err
		}
		// The kubeconfig says where and who; rate limits are the
		// controller's (--kube-api-qps, --kube-api-burst), and so is the
		// absence of a per-request time limit: readiness waits watch for
		// minutes and are bounded by their own timeouts.
		remote.QPS, remote.Burst, remote.Timeout = cfg.QPS, cfg.Burst, cfg.Timeout
		cfg, t.Remote, t.Cluster = remote, true, cluster
	}
	if sa := ImpersonatedServiceAccount(req.ServiceAccountName, b.opts.DefaultServiceAccount); sa != "" {
		t.ServiceAccount = sa
		cfg.Impersonate = rest.ImpersonationConfig{UserName: ServiceAccountUsername(req.Namespace, sa)}
	}
	t.Getter = NewGetter(cfg, req.ReleaseNamespace, req.Persistent)
	return t, nil
}

func (b *Builder) remoteConfig(ctx context.Context, req Request, kc *meta.KubeConfigReference) (*rest.Config, string, error) {
	switch {
	case kc.SecretRef != nil && kc.ConfigMapRef != nil:
		return nil, "", errors.New("spec.kubeConfig sets both secretRef and configMapRef; set exactly one")
	case kc.SecretRef != nil:
		key := client.ObjectKey{Namespace: req.Namespace, Name: kc.SecretRef.Name}
		secret := &corev1.Secret{}
		if err := b.opts.Client.Get(ctx, key, secret); err != nil {
			return nil, "", fmt.Errorf("could not get kubeconfig Secret '%s': %w", key, err)
		}
		data, err := KubeConfigFromSecret(secret, kc.SecretRef.Key)
		if err != nil {
			return nil, "", err
		}
		cfg, err := RESTConfigFromKubeConfig(ctx, data, b.opts.KubeConfig)
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig Secret '%s': %w", key, err)
		}
		return cfg, fmt.Sprintf("the cluster of kubeconfig Secret '%s' (%s)", key, cfg.Host), nil
	case kc.ConfigMapRef != nil:
		key := client.ObjectKey{Namespace: req.Namespace, Name: kc.ConfigMapRef.Name}
		cm := &corev1.ConfigMap{}
		if err := b.opts.Client.Get(ctx, key, cm); err != nil {
			return nil, "", fmt.Errorf("could not get kubeconfig ConfigMap '%s': %w", key, err)
		}
		if err := CheckProviderConfigMap(cm); err != nil {
			return nil, "", err
		}
		var opts []auth.Option
		if b.opts.TokenCache != nil {
			opts = append(opts, auth.WithCache(*b.opts.TokenCache, cache.InvolvedObject{
				Kind: req.Kind, Name: req.Name, Namespace: req.Namespace, Operation: cache.OperationReconcile,
			}))
		}
		cfg, err := authutils.GetRESTConfig(ctx, *kc, req.Namespace, b.opts.Client, opts...)
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig ConfigMap '%s' (provider %s): %w", key, cm.Data[meta.KubeConfigKeyProvider], err)
		}
		return cfg, fmt.Sprintf("the %s cluster of kubeconfig ConfigMap '%s' (%s)", cm.Data[meta.KubeConfigKeyProvider], key, cfg.Host), nil
	default:
		return nil, "", errors.New("spec.kubeConfig sets neither secretRef nor configMapRef; set exactly one")
	}
}

// Providers are the values of a kubeconfig ConfigMap's provider key.
var Providers = []string{"aws", "azure", "gcp", "generic"}

// CheckProviderConfigMap checks what can be checked of a kubeconfig
// ConfigMap without asking a cloud provider, so a typo is reported as such
// instead of as a failed token exchange.
func CheckProviderConfigMap(cm *corev1.ConfigMap) error {
	name := cm.Namespace + "/" + cm.Name
	provider := cm.Data[meta.KubeConfigKeyProvider]
	switch provider {
	case "":
		return fmt.Errorf("%w: ConfigMap '%s' has no '%s' key; set it to one of %s",
			ErrInvalidKubeConfig, name, meta.KubeConfigKeyProvider, strings.Join(Providers, ", "))
	case "generic":
		address := cm.Data[meta.KubeConfigKeyAddress]
		if address == "" {
			return fmt.Errorf("%w: ConfigMap '%s': the generic provider needs the API server's '%s'",
				ErrInvalidKubeConfig, name, meta.KubeConfigKeyAddress)
		}
		if _, err := auth.ParseClusterAddress(address); err != nil {
			return fmt.Errorf("%w: ConfigMap '%s': %w", ErrInvalidKubeConfig, name, err)
		}
	case "aws", "azure", "gcp":
		if cm.Data[meta.KubeConfigKeyCluster] == "" && (cm.Data[meta.KubeConfigKeyAddress] == "" || cm.Data[meta.KubeConfigKeyCACert] == "") {
			return fmt.Errorf("%w: ConfigMap '%s': provider %s needs the '%s' resource name unless both '%s' and '%s' are set",
				ErrInvalidKubeConfig, name, provider, meta.KubeConfigKeyCluster, meta.KubeConfigKeyAddress, meta.KubeConfigKeyCACert)
		}
		if provider == "aws" && cm.Data[meta.KubeConfigKeyCluster] == "" {
			return fmt.Errorf("%w: ConfigMap '%s': provider aws needs the '%s' ARN (it names the region)",
				ErrInvalidKubeConfig, name, meta.KubeConfigKeyCluster)
		}
	default:
		return fmt.Errorf("%w: ConfigMap '%s': unknown provider '%s'; use one of %s",
			ErrInvalidKubeConfig, name, provider, strings.Join(Providers, ", "))
	}
	return nil
}

// Forget drops the token cache's metrics of a deleted object; nil-safe.
func (b *Builder) Forget(kind, namespace, name string) {
	if b == nil || b.opts.TokenCache == nil {
		return
	}
	b.opts.TokenCache.DeleteEventsForObject(kind, name, namespace, cache.OperationReconcile)
}
