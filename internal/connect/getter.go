package connect

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Getter is the genericclioptions.RESTClientGetter of one Target.
//
// A persistent Getter (spec.persistentClient, the default) makes its
// discovery client and REST mapper once and hands the same ones to every
// Helm step of the reconcile, so discovery runs once. A non-persistent one
// makes fresh ones on every call, so each step sees kinds registered by an
// earlier step (CRDs a chart creates outside Helm's crds/ directory) at the
// price of repeated discovery.
type Getter struct {
	cfg        *rest.Config
	namespace  string
	persistent bool

	mu        sync.Mutex
	discovery discovery.CachedDiscoveryInterface
	mapper    meta.RESTMapper
}

var _ genericclioptions.RESTClientGetter = (*Getter)(nil)

// NewGetter returns a Getter for cfg (copied); namespace is the default
// namespace of clients built from it.
func NewGetter(cfg *rest.Config, namespace string, persistent bool) *Getter {
	return &Getter{cfg: rest.CopyConfig(cfg), namespace: namespace, persistent: persistent}
}

// Persistent tells whether discovery and the REST mapper are reused.
func (g *Getter) Persistent() bool { return g.persistent }

// ToRESTConfig returns a copy of the target's REST config, impersonation
// included.
func (g *Getter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(g.cfg), nil
}

// ToDiscoveryClient returns a discovery client caching in memory.
func (g *Getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if !g.persistent {
		return g.newDiscovery()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.discovery == nil {
		d, err := g.newDiscovery()
		if err != nil {
			return nil, err
		}
		g.discovery = d
	}
	return g.discovery, nil
}

// ToRESTMapper returns a REST mapper over ToDiscoveryClient; Helm resets it
// when it installs CRDs.
func (g *Getter) ToRESTMapper() (meta.RESTMapper, error) {
	if !g.persistent {
		d, err := g.newDiscovery()
		if err != nil {
			return nil, err
		}
		return newMapper(d), nil
	}
	d, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mapper == nil {
		g.mapper = newMapper(d)
	}
	return g.mapper, nil
}

// ToRawKubeConfigLoader serves only the default namespace: the REST config
// (with any impersonation) comes from ToRESTConfig, and every Helm kube
// client sets its namespace explicitly.
func (g *Getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	overrides := &clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}}
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), overrides)
}

func (g *Getter) newDiscovery() (discovery.CachedDiscoveryInterface, error) {
	cfg := rest.CopyConfig(g.cfg)
	// Discovery asks for every group version at once; a low burst would
	// throttle it on clusters with many CRDs.
	if cfg.Burst < 100 {
		cfg.Burst = 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return memory.NewMemCacheClient(dc), nil
}

func newMapper(d discovery.CachedDiscoveryInterface) meta.RESTMapper {
	return NewMapper(d)
}
