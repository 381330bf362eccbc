package cluster

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is a client certificate and the user it stands for.
type identity struct {
	user string
	keyPair
}

// writeKubeconfig writes a self-contained kubeconfig (certificates inline) so
// the file keeps working when copied elsewhere.
func writeKubeconfig(path, clusterName, server string, caPEM []byte, id identity) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[clusterName] = &clientcmdapi.Cluster{
		Server:                   server,
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos[id.user] = &clientcmdapi.AuthInfo{
		ClientCertificateData: id.certPEM,
		ClientKeyData:         id.keyPEM,
	}
	cfg.Contexts[clusterName] = &clientcmdapi.Context{Cluster: clusterName, AuthInfo: id.user}
	cfg.CurrentContext = clusterName
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// restConfig returns a client configuration for id. Rate limits are raised
// well above client-go's defaults: tests create objects in bursts and the
// server is local.
func restConfig(server string, caPEM []byte, id identity) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: id.certPEM,
			KeyData:  id.keyPEM,
		},
		QPS:   100,
		Burst: 200,
	}
}
