package connect

import (
	"context"
	"errors"
	"fmt"

	runtimeclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/go-logr/logr"
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
// files of the controller's file system). As upstream's client does, a
// credential plugin (exec) and disabled TLS verification are dropped unless
// the controller's operator allowed them with --insecure-kubeconfig-exec and
// --insecure-kubeconfig-tls, and auth-provider plugins always are: the rest
// of the kubeconfig (a token, a client certificate, the system's roots of
// trust) is used as it is, and the log says what was left out. A cluster's
// proxy-url is kept (runtimeclient.KubeConfig copies it), as upstream does.
func RESTConfigFromKubeConfig(ctx context.Context, data []byte, opts runtimeclient.KubeConfigOptions) (*rest.Config, error) {
	raw, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKubeConfig, err)
	}
	if err := runtimeclient.ValidateKubeConfig(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKubeConfig, err)
	}
	kctx, ok := raw.Contexts[raw.CurrentContext]
	if !ok || kctx == nil {
		return nil, fmt.Errorf("%w: current context '%s' not found", ErrInvalidKubeConfig, raw.CurrentContext)
	}
	if dropped := droppedSettings(raw, kctx, opts); len(dropped) > 0 {
		logr.FromContextOrDiscard(ctx).Info("kubeconfig settings left out, as upstream leaves them out", "settings", dropped)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKubeConfig, err)
	}
	return runtimeclient.KubeConfig(ctx, cfg, opts), nil
}

// droppedSettings names the settings of the current context that
// runtimeclient.KubeConfig leaves out under opts.
func droppedSettings(raw *clientcmdapi.Config, kctx *clientcmdapi.Context, opts runtimeclient.KubeConfigOptions) []string {
	var dropped []string
	if cluster := raw.Clusters[kctx.Cluster]; cluster != nil && cluster.InsecureSkipTLSVerify && !opts.InsecureTLS {
		dropped = append(dropped, fmt.Sprintf("insecure-skip-tls-verify of cluster '%s' (allowed by --insecure-kubeconfig-tls)", kctx.Cluster))
	}
	user := raw.AuthInfos[kctx.AuthInfo]
	if user == nil {
		return dropped
	}
	if user.Exec != nil && !opts.InsecureExecProvider {
		dropped = append(dropped, fmt.Sprintf("credential plugin '%s' (exec) of user '%s' (allowed by --insecure-kubeconfig-exec)", user.Exec.Command, kctx.AuthInfo))
	}
	if user.AuthProvider != nil {
		dropped = append(dropped, fmt.Sprintf("auth-provider plugin '%s' of user '%s'", user.AuthProvider.Name, kctx.AuthInfo))
	}
	return dropped
}
