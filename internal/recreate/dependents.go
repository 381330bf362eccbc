package recreate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Dependents finds the objects that name an owner in their
// ownerReferences: what the garbage collector deletes with it.
type Dependents interface {
	// Owned returns the dependents of owner as Kind/namespace/name. all
	// asks for dependents of every kind the API server lists; otherwise
	// only PersistentVolumeClaims and PersistentVolumes are looked for.
	Owned(ctx context.Context, owner *unstructured.Unstructured, all bool) ([]string, error)
}

// ClusterDependents lists dependents through the API server, as the
// identity of the getter it was made with. Its clients are made on first
// use: most actions never recreate anything.
type ClusterDependents struct {
	getter Getter

	once  sync.Once
	meta  metadata.Interface
	disco discovery.CachedDiscoveryInterface
	err   error
}

// Getter reaches a cluster as some identity: Helm's configuration and
// kubectl's RESTClientGetter both are one.
type Getter interface {
	ToRESTConfig() (*rest.Config, error)
	ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error)
}

// NewDependents returns the Dependents of the cluster getter reaches.
func NewDependents(getter Getter) *ClusterDependents {
	return &ClusterDependents{getter: getter}
}

func (d *ClusterDependents) clients() error {
	d.once.Do(func() {
		if d.getter == nil {
			d.err = errors.New("no cluster connection")
			return
		}
		cfg, err := d.getter.ToRESTConfig()
		if err != nil {
			d.err = err
			return
		}
		if d.meta, err = metadata.NewForConfig(cfg); err != nil {
			d.err = err
			return
		}
		d.disco, d.err = d.getter.ToDiscoveryClient()
	})
	return d.err
}

var (
	pvcResource = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	pvResource  = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
)

// listed is a resource to look for dependents in.
type listed struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// Owned implements Dependents. A namespaced owner can only have
// dependents in its namespace; a cluster-scoped one anywhere.
func (d *ClusterDependents) Owned(ctx context.Context, owner *unstructured.Unstructured, all bool) ([]string, error) {
	if err := d.clients(); err != nil {
		return nil, err
	}
	resources := []listed{{gvr: pvcResource, kind: "PersistentVolumeClaim", namespaced: true}}
	if owner.GetNamespace() == "" {
		resources = append(resources, listed{gvr: pvResource, kind: "PersistentVolume"})
	}
	if all {
		var err error
		if resources, err = d.listable(owner.GetNamespace() != ""); err != nil {
			return nil, err
		}
	}
	var owned []string
	for _, res := range resources {
		found, err := d.ownedOf(ctx, res, owner)
		if err != nil {
			return nil, err
		}
		owned = append(owned, found...)
	}
	return owned, nil
}

// listable returns every resource the API server lists (namespaced ones
// only, when onlyNamespaced), from fresh discovery: a CRD installed a
// moment ago counts too. Groups whose discovery fails (an aggregated API
// that is down) are left out; the garbage collector cannot see them
// either.
func (d *ClusterDependents) listable(onlyNamespaced bool) ([]listed, error) {
	d.disco.Invalidate()
	lists, err := discovery.ServerPreferredResources(d.disco)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovering the API server's resources: %w", err)
	}
	var out []listed
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if onlyNamespaced && !r.Namespaced || !hasVerb(r.Verbs, "list") {
				continue
			}
			out = append(out, listed{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced})
		}
	}
	return out, nil
}

func hasVerb(verbs metav1.Verbs, verb string) bool {
	for _, v := range verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// ownedOf lists the objects of res whose ownerReferences name owner's UID,
// page by page, metadata only.
func (d *ClusterDependents) ownedOf(ctx context.Context, res listed, owner *unstructured.Unstructured) ([]string, error) {
	ns := owner.GetNamespace()
	if !res.namespaced {
		ns = ""
	}
	var owned []string
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := d.meta.Resource(res.gvr).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", res.gvr.GroupResource(), err)
		}
		for i := range list.Items {
			if ownedBy(list.Items[i].OwnerReferences, owner.GetUID()) {
				owned = append(owned, name(res.kind, list.Items[i].Namespace, list.Items[i].Name))
			}
		}
		if list.Continue == "" {
			return owned, nil
		}
		opts.Continue = list.Continue
	}
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, ref := range refs {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// name is Kind/namespace/name, or Kind/name when cluster-scoped.
func name(kind, namespace, n string) string {
	if namespace == "" {
		return kind + "/" + n
	}
	return kind + "/" + namespace + "/" + n
}
