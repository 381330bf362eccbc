package helmclient

import (
	"sync"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// Clusters holds what is shared per cluster, keyed by the API server's
// address: an impersonated identity or a fresh connection to the same
// server shares it, a remote cluster has its own. Safe for concurrent use.
type Clusters struct {
	mu         sync.Mutex
	validation map[string]*FieldValidation
}

// NewClusters returns an empty set of per-cluster caches.
func NewClusters() *Clusters {
	return &Clusters{validation: map[string]*FieldValidation{}}
}

// FieldValidation returns the FieldValidation of the API server at host.
func (c *Clusters) FieldValidation(host string) *FieldValidation {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.validation[host]
	if !ok {
		v = NewFieldValidation()
		c.validation[host] = v
	}
	return v
}

// NewClient returns Helm's kube client for getter. Its manifest validation
// shares known (kinds the server validates itself cost no OpenAPI request
// or decode once known), and its status waits see only the objects they
// wait for.
func NewClient(getter genericclioptions.RESTClientGetter, known *FieldValidation) *Client {
	kc := helmkube.New(getter)
	if full, ok := kc.Factory.(cmdutil.Factory); ok && known != nil {
		kc.Factory = &validatingFactory{Factory: full, known: known}
	}
	return &Client{Client: kc}
}
