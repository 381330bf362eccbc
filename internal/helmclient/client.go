package helmclient

import (
	"sync"

	helmkube "helm.sh/helm/v4/pkg/kube"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/afterhooks/helm-controller/internal/jobttl"
)

// Clusters holds what is shared per cluster, keyed by the API server's
// address: an impersonated identity or a fresh connection to the same
// server shares it, a remote cluster has its own. Safe for concurrent use.
type Clusters struct {
	mu         sync.Mutex
	validation map[string]*FieldValidation
	jobs       map[string]*jobttl.Tracker
}

// NewClusters returns an empty set of per-cluster caches.
func NewClusters() *Clusters {
	return &Clusters{validation: map[string]*FieldValidation{}, jobs: map[string]*jobttl.Tracker{}}
}

// Jobs returns the tracker of the self-deleting Jobs applied to the API
// server at host, shared by every action of the process, so that a
// readiness wait resumed by a later reconcile still knows how a Job it
// did not see ended.
func (c *Clusters) Jobs(host string) *jobttl.Tracker {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.jobs[host]
	if !ok {
		t = jobttl.NewTracker()
		c.jobs[host] = t
	}
	return t
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
// wait for. It tracks the self-deleting Jobs it applies with a tracker of
// its own; set Jobs to share one.
func NewClient(getter genericclioptions.RESTClientGetter, known *FieldValidation) *Client {
	kc := helmkube.New(getter)
	if full, ok := kc.Factory.(cmdutil.Factory); ok && known != nil {
		kc.Factory = &validatingFactory{Factory: full, known: known}
	}
	return &Client{Client: kc, Jobs: jobttl.NewTracker()}
}
