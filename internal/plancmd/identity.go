package plancmd

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/runner"
)

// releaseRunner is the runner of obj's release as the controller builds
// it: on the cluster of spec.kubeConfig, as the ServiceAccount of
// spec.serviceAccountName (or the controller's --default-service-account),
// over the plan's own connection. Storage reads and dry runs then go where
// and as whom the controller's would, so a plan sees no more than the
// controller would: a tenant's plan is refused what the tenant's account
// is refused. The kubeconfig Secret or ConfigMap is read with the plan's
// identity.
func releaseRunner(ctx context.Context, local *rest.Config, c client.Client, factory *action.ConfigFactory,
	obj *v2.HelmRelease, set *settings) (*runner.Runner, error) {
	builder, err := connect.NewBuilder(connect.Options{Local: local, Client: c, DefaultServiceAccount: set.defaultSA})
	if err != nil {
		return nil, err
	}
	target, err := builder.Build(ctx, connect.Request{
		Kind: helmv2.HelmReleaseKind, Namespace: obj.Namespace, Name: obj.Name,
		ReleaseNamespace: obj.GetReleaseNamespace(), KubeConfig: obj.Spec.KubeConfig,
		ServiceAccountName: obj.Spec.ServiceAccountName, Persistent: obj.UsePersistentClient(),
	})
	if err != nil {
		return nil, fmt.Errorf("connecting as the controller would for HelmRelease %s/%s: %w", obj.Namespace, obj.Name, err)
	}
	if !target.Shared() {
		if factory, err = factory.ForGetter(target.Getter); err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", target.Cluster, err)
		}
	}
	return runner.New(factory, target, obj, set.runner())
}

// objectLookup tells whether an object exists: a Secret or ConfigMap
// the pods need, for the preview's warning about a wait that cannot end,
// or an object the action would delete. It reads metadata only, with the
// plan's identity, on the controller's cluster: for a remote release
// (spec.kubeConfig) it does not look. An object the identity may not read
// counts as there: the plan says what it knows. An object of a kind the
// API server no longer serves (its CRD is gone) is not there.
func objectLookup(c client.Client, obj *v2.HelmRelease) preview.Lookup {
	if obj.Spec.KubeConfig != nil {
		return nil
	}
	return func(ctx context.Context, apiVersion, kind, namespace, name string) (bool, error) {
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return false, fmt.Errorf("reading apiVersion %q: %w", apiVersion, err)
		}
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(gv.WithKind(kind))
		err = c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, meta)
		switch {
		case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
			return false, nil
		case apierrors.IsForbidden(err):
			return true, nil
		}
		return err == nil, err
	}
}
