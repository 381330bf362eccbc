package connect

import (
	"context"
	"errors"
	"fmt"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The data keys a kubeconfig Secret is read from when secretRef.key is empty,
// in this order (the keys Flux controllers and Cluster API write).
const (
	DefaultKubeConfigSecretKey    = "value"
	DefaultKubeConfigSecretKeyExt = "value.yaml"
)

// ErrInvalidKubeConfig marks kubeconfig data that cannot be used as it is;
// retrying does not help until the Secret changes.
var ErrInvalidKubeConfig = errors.New("invalid kubeconfig")

// KubeConfigFromSecret returns the kubeconfig bytes in secret: the value of
// key when given, else of the first default key present.
func KubeConfigFromSecret(secret *corev1.Secret, key string) ([]byte, error) {
	name := secret.Namespace + "/" + secret.Name
	if key != "" {
		data, ok := secret.Data[key]
		if !ok || len(data) == 0 {
			return nil, fmt.Errorf("%w: Secret '%s' has no data under key '%s'", ErrInvalidKubeConfig, name, key)
		}
		return data, nil
	}
	for _, k := range []string{DefaultKubeConfigSecretKey, DefaultKubeConfigSecretKeyExt} {
		if data := secret.Data[k]; len(data) > 0 {
			return data, nil
		}
	}
	return nil, fmt.Errorf("%w: Secret '%s' has neither a '%s' nor a '%s' key; set spec.kubeConfig.secretRef.key to the key that holds the kubeconfig",
		ErrInvalidKubeConfig, name, DefaultKubeConfigSecretKey, DefaultKubeConfigSecretKeyExt)
}

// RESTConfigFromKubeConfig turns kubeconfig data from a user into a REST
// config for its current context. The kubeconfig must be self-contained (no
// files of the controller's file system). Credential plugins (exec) and
// disabled TLS verification run code or trust a server on the user's say,
// so they are refused unless the controller's operator allowed them with
// --insecure-kubeconfig-exec and --insecure-kubeconfig-tls; refusing, rather
// than silently dropping them, tells the user why the cluster is unreachable.
// File paths and auth-provider plugins are refused up front; a cluster's
// proxy-url is kept (runtimeclient.KubeConfig copies it), as upstream does.
func RESTConfigFromKubeConfig(ctx context.Context, data []byte, opts runtimeclient.KubeConfigOptions) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKubeConfig, err)
	}
	if err := runtimeclient.ValidateKubeConfig(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKubeConfig, err)
	}
	if err := checkInsecure(raw, opts); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKubeConfig, err)
	}
	return runtimeclient.KubeConfig(ctx, cfg, opts), nil
}

// checkInsecure refuses the current context's exec plugin, auth-provider
// plugin and skipped TLS verification unless opts allow them.
func checkInsecure(raw *clientcmdapi.Config, opts runtimeclient.KubeConfigOptions) error {
	ctxName := raw.CurrentContext
	kctx, ok := raw.Contexts[ctxName]
	if !ok || kctx == nil {
		return fmt.Errorf("%w: current context '%s' not found", ErrInvalidKubeConfig, ctxName)
	}
	if cluster := raw.Clusters[kctx.Cluster]; cluster != nil && cluster.InsecureSkipTLSVerify && !opts.InsecureTLS {
		return fmt.Errorf("%w: cluster '%s' sets insecure-skip-tls-verify, which this controller refuses "+
			"(its operator can allow it with --insecure-kubeconfig-tls); give the cluster's certificate-authority-data instead",
			ErrInvalidKubeConfig, kctx.Cluster)
	}
	user := raw.AuthInfos[kctx.AuthInfo]
	if user == nil {
		return nil
	}
	if user.Exec != nil && !opts.InsecureExecProvider {
		return fmt.Errorf("%w: user '%s' runs the credential plugin '%s' (exec), which this controller refuses "+
			"(its operator can allow it with --insecure-kubeconfig-exec); use a token or client certificate, or spec.kubeConfig.configMapRef",
			ErrInvalidKubeConfig, kctx.AuthInfo, user.Exec.Command)
	}
	if user.AuthProvider != nil {
		return fmt.Errorf("%w: user '%s' uses the auth-provider plugin '%s', which is not supported; use a token or client certificate",
			ErrInvalidKubeConfig, kctx.AuthInfo, user.AuthProvider.Name)
	}
	return nil
}
