package plancmd

import (
	"context"
	"encoding/json"
	"fmt"

	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// overlay is the cluster as a stream's change would leave it, for reads:
// Get answers with the stream's copy of an object it holds, and with the
// cluster's otherwise. valuesFrom (chartutil), the Secrets of a source
// and the HelmRepository of a chart template all read through Get, so
// each sees the stream's ConfigMaps, Secrets and sources. Lists and
// writes go to the cluster: a plan writes nothing.
type overlay struct {
	client.Client
	objects map[streamKey][]byte
}

// Get reads obj from the stream when the stream holds it.
func (o *overlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, o.Scheme())
	if err != nil {
		return err
	}
	data, ok := o.objects[streamKey{kind: gvk.Kind, namespace: key.Namespace, name: key.Name}]
	if !ok {
		return o.Client.Get(ctx, key, obj, opts...)
	}
	if err := json.Unmarshal(data, obj); err != nil {
		return fmt.Errorf("reading %s %s of --file: %w", gvk.Kind, key, err)
	}
	obj.SetNamespace(key.Namespace)
	return nil
}

// inStream tells whether the stream holds the object of kind at key.
func (o *overlay) inStream(kind string, key client.ObjectKey) bool {
	_, ok := o.objects[streamKey{kind: kind, namespace: key.Namespace, name: key.Name}]
	return ok
}

// streamSourceChange says how a source object of the stream asks for
// another chart than the cluster's copy of it serves: the OCIRepository
// of spec.chartRef, or the HelmRepository of the chart template. Empty
// when c is not an overlay, the stream does not hold the source, or the
// two agree.
func streamSourceChange(ctx context.Context, c client.Client, obj *v2.HelmRelease) (string, error) {
	ov, ok := c.(*overlay)
	if !ok {
		return "", nil
	}
	if ref := obj.Spec.ChartRef; ref != nil && ref.Kind == sourcev1.OCIRepositoryKind {
		key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		if key.Namespace == "" {
			key.Namespace = obj.Namespace
		}
		if !ov.inStream(sourcev1.OCIRepositoryKind, key) {
			return "", nil
		}
		want := &sourcev1.OCIRepository{}
		if err := ov.Get(ctx, key, want); err != nil {
			return "", err
		}
		return ociTemplateChange(ctx, ov.Client, key, want.Spec)
	}
	ref := obj.GetHelmChartTemplateReference()
	if obj.Spec.Chart == nil || ref == nil || obj.Spec.Chart.Spec.SourceRef == nil ||
		obj.Spec.Chart.Spec.SourceRef.Kind != sourcev1.HelmRepositoryKind {
		return "", nil
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: obj.Spec.Chart.Spec.SourceRef.Name}
	if !ov.inStream(sourcev1.HelmRepositoryKind, key) {
		return "", nil
	}
	want, live := &sourcev1.HelmRepository{}, &sourcev1.HelmRepository{}
	if err := ov.Get(ctx, key, want); err != nil {
		return "", err
	}
	if err := ov.Client.Get(ctx, key, live); apierrors.IsNotFound(err) {
		return fmt.Sprintf("HelmRepository %s of --file does not exist yet", key), nil
	} else if err != nil {
		return "", fmt.Errorf("reading the HelmRepository %s: %w", key, err)
	}
	if sameChartRepository(live.Spec, want.Spec) {
		return "", nil
	}
	return fmt.Sprintf("HelmRepository %s of --file differs from the cluster's (%s)", key, want.Spec.URL), nil
}

// sameChartRepository tells whether two HelmRepository specs serve the
// same charts: the same repository, reached the same way. An interval or
// a timeout changes nothing a plan would fetch.
func sameChartRepository(a, b sourcev1.HelmRepositorySpec) bool {
	// The API server fills in the defaults a stream's copy may leave out.
	orDefault := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	return a.URL == b.URL && orDefault(a.Type, sourcev1.HelmRepositoryTypeDefault) == orDefault(b.Type, sourcev1.HelmRepositoryTypeDefault) &&
		orDefault(a.Provider, sourcev1.GenericOCIProvider) == orDefault(b.Provider, sourcev1.GenericOCIProvider) &&
		a.Insecure == b.Insecure && a.PassCredentials == b.PassCredentials &&
		equality.Semantic.DeepEqual(a.SecretRef, b.SecretRef) &&
		equality.Semantic.DeepEqual(a.CertSecretRef, b.CertSecretRef)
}

// chartRefFromStream pulls the chart of the stream's OCIRepository that
// spec.chartRef names, as source-controller would once it is applied.
func chartRefFromStream(ctx context.Context, c client.Client, obj *v2.HelmRelease, digestPinned bool) (*resolved, error) {
	key := types.NamespacedName{Namespace: obj.Spec.ChartRef.Namespace, Name: obj.Spec.ChartRef.Name}
	if key.Namespace == "" {
		key.Namespace = obj.Namespace
	}
	src := &sourcev1.OCIRepository{}
	if err := c.Get(ctx, key, src); err != nil {
		return nil, fmt.Errorf("reading the source OCIRepository %s: %w", key, err)
	}
	return pullTemplateOCI(ctx, c, key.Namespace, src.Spec, digestPinned)
}

// clusterOf is the cluster behind c: a source's status (its artifact) is
// the cluster's, never in a stream.
func clusterOf(c client.Client) client.Client {
	if ov, ok := c.(*overlay); ok {
		return ov.Client
	}
	return c
}
