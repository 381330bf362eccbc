package plancmd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// The chart a change asks for. The controller builds the HelmChart or
// OCIRepository of a chart template from the live spec, so while a pull
// request that bumps spec.chart.spec.version is not merged, the live
// source object still serves the old chart. A plan of the change resolves
// the template itself then, read-only and as source-controller would: it
// creates no source object.

// templateChange says how obj's chart template asks for another chart
// than the live source object serves: empty when it does not, or when obj
// has no chart template.
func templateChange(ctx context.Context, c client.Client, obj *v2.HelmRelease) (string, error) {
	ref := obj.GetHelmChartTemplateReference()
	if obj.Spec.Chart == nil || ref == nil {
		return "", nil
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	if ref.Kind == sourcev1.OCIRepositoryKind {
		return ociTemplateChange(ctx, c, key, obj.Spec.Chart.Spec.OCIRepositorySpec)
	}
	return helmChartTemplateChange(ctx, c, key, obj.Spec.Chart.Spec)
}

func ociTemplateChange(ctx context.Context, c client.Client, key types.NamespacedName, want sourcev1.OCIRepositorySpec) (string, error) {
	live := &sourcev1.OCIRepository{}
	if err := c.Get(ctx, key, live); apierrors.IsNotFound(err) {
		return fmt.Sprintf("no OCIRepository %s exists yet", key), nil
	} else if err != nil {
		return "", fmt.Errorf("reading the source OCIRepository %s: %w", key, err)
	}
	if live.Spec.URL == want.URL && equality.Semantic.DeepEqual(live.Spec.Reference, want.Reference) {
		return "", nil
	}
	return fmt.Sprintf("OCIRepository %s serves %s, the change asks for %s", key, ociLocation(live.Spec), ociLocation(want)), nil
}

func helmChartTemplateChange(ctx context.Context, c client.Client, key types.NamespacedName, want helmv2.HelmChartTemplateSpec) (string, error) {
	live := &sourcev1.HelmChart{}
	if err := c.Get(ctx, key, live); apierrors.IsNotFound(err) {
		return fmt.Sprintf("no HelmChart %s exists yet", key), nil
	} else if err != nil {
		return "", fmt.Errorf("reading the source HelmChart %s: %w", key, err)
	}
	wantRef := sourcev1.LocalHelmChartSourceReference{}
	if want.SourceRef != nil {
		wantRef = sourcev1.LocalHelmChartSourceReference{Kind: want.SourceRef.Kind, Name: want.SourceRef.Name}
	}
	got := live.Spec
	if got.Chart == want.Chart && got.Version == want.GetVersion() &&
		got.SourceRef.Kind == wantRef.Kind && got.SourceRef.Name == wantRef.Name &&
		slices.Equal(got.ValuesFiles, want.ValuesFiles) && got.IgnoreMissingValuesFiles == want.IgnoreMissingValuesFiles {
		return "", nil
	}
	return fmt.Sprintf("HelmChart %s serves %s, the change asks for %s", key,
		chartLocation(got.Chart, got.Version, got.SourceRef.Kind, got.SourceRef.Name, got.ValuesFiles),
		chartLocation(want.Chart, want.GetVersion(), wantRef.Kind, wantRef.Name, want.ValuesFiles)), nil
}

func chartLocation(chart, version, kind, name string, valuesFiles []string) string {
	s := fmt.Sprintf("%s@%s from %s/%s", chart, version, kind, name)
	if len(valuesFiles) > 0 {
		s += " with values files " + strings.Join(valuesFiles, ",")
	}
	return s
}

// ociLocation names an OCI repository and the reference it asks for.
func ociLocation(spec sourcev1.OCIRepositorySpec) string {
	ref := spec.Reference
	switch {
	case ref == nil:
		return spec.URL + ":latest"
	case ref.Digest != "":
		return spec.URL + "@" + ref.Digest
	case ref.SemVer != "":
		return spec.URL + " semver " + ref.SemVer
	case ref.Tag != "":
		return spec.URL + ":" + ref.Tag
	}
	return spec.URL + ":latest"
}
