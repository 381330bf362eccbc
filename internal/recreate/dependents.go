package recreate

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// Owned returns the objects that may depend on owner, directly or
	// through others, by the UID of the owner each names: every object
	// with ownerReferences in owner's namespace (anywhere, when owner is
	// cluster-scoped), of every kind the API server lists.
	Owned(ctx context.Context, owner *unstructured.Unstructured) (Owners, error)
}

// Dependent is an object that names an owner in its ownerReferences.
type Dependent struct {
	Kind            schema.GroupKind
	Namespace, Name string
	UID             types.UID
}

// String is Kind/namespace/name, or Kind/name when cluster-scoped.
func (d Dependent) String() string { return name(d.Kind.Kind, d.Namespace, d.Name) }

// Owners maps the UID of an owner to the objects that name it in their
// ownerReferences.
type Owners map[types.UID][]Dependent

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

// listed is a resource to look for dependents in.
type listed struct {
	gvr        schema.GroupVersionResource
	kind       schema.GroupKind
	namespaced bool
}

// Owned implements Dependents. A namespaced owner can only have
// dependents in its namespace; a cluster-scoped one anywhere.
func (d *ClusterDependents) Owned(ctx context.Context, owner *unstructured.Unstructured) (Owners, error) {
	if err := d.clients(); err != nil {
		return nil, err
	}
	resources, err := d.listable(owner.GetNamespace() != "")
	if err != nil {
		return nil, err
	}
	owners := Owners{}
	for _, res := range resources {
		if err := d.index(ctx, res, owner.GetNamespace(), owners); err != nil {
			return nil, err
		}
	}
	return owners, nil
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
			out = append(out, listed{gvr: gv.WithResource(r.Name), kind: schema.GroupKind{Group: gv.Group, Kind: r.Kind}, namespaced: r.Namespaced})
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

// index adds to owners the objects of res in namespace ns (every
// namespace when "") that have owners, page by page, metadata only.
func (d *ClusterDependents) index(ctx context.Context, res listed, ns string, owners Owners) error {
	if !res.namespaced {
		ns = ""
	}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := d.meta.Resource(res.gvr).Namespace(ns).List(ctx, opts)
		if apierrors.IsNotFound(err) {
			// Served at discovery, gone since (a CRD deleted meanwhile,
			// by another release's uninstall say): with the kind, its
			// objects are gone too, so none can depend on the owner.
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", res.gvr.GroupResource(), err)
		}
		for _, item := range list.Items {
			dep := Dependent{Kind: res.kind, Namespace: item.Namespace, Name: item.Name, UID: item.UID}
			for _, ref := range item.OwnerReferences {
				owners[ref.UID] = append(owners[ref.UID], dep)
			}
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

// name is Kind/namespace/name, or Kind/name when cluster-scoped.
func name(kind, namespace, n string) string {
	if namespace == "" {
		return kind + "/" + n
	}
	return kind + "/" + namespace + "/" + n
}
