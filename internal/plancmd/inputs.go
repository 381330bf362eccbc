package plancmd

import (
	"context"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/chartutil"
	"github.com/fluxcd/pkg/runtime/conditions"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/go-logr/logr"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/chartsource"
	"github.com/afterhooks/helm-controller/internal/redact"
)

// helmRelease is the HelmRelease to plan: the live one, or the file's
// spec with the live status (none for a HelmRelease not applied yet).
func helmRelease(ctx context.Context, c client.Client, o *options) (*v2.HelmRelease, error) {
	if o.file == "" {
		key := types.NamespacedName{Namespace: o.namespace, Name: o.name}
		live := &v2.HelmRelease{}
		err := c.Get(ctx, key, live)
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("HelmRelease %s not found", key)
		case err != nil:
			return nil, fmt.Errorf("reading HelmRelease %s: %w", key, err)
		}
		return live, nil
	}
	fromFile, err := readHelmRelease(o.file, o.fileData)
	if err != nil {
		return nil, err
	}
	if o.name == "" {
		o.name = fromFile.Name
	}
	if fromFile.Namespace != "" && !nsFlagSet(o) {
		o.namespace = fromFile.Namespace
	}
	fromFile.Name, fromFile.Namespace = o.name, o.namespace
	return overLive(ctx, c, fromFile)
}

// overLive is fromFile's spec with the status of its live copy, and the
// generation applying it would give; fromFile as it is when it is not
// applied yet.
func overLive(ctx context.Context, c client.Client, fromFile *v2.HelmRelease) (*v2.HelmRelease, error) {
	key := client.ObjectKeyFromObject(fromFile)
	live := &v2.HelmRelease{}
	err := c.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		return fromFile, nil
	case err != nil:
		return nil, fmt.Errorf("reading HelmRelease %s: %w", key, err)
	}
	fromFile.Status = live.Status
	fromFile.Generation = nextGeneration(live, fromFile)
	return fromFile, nil
}

// nextGeneration is the generation the API server would give the file's
// HelmRelease once applied over live: the same when the spec is the same,
// the next one otherwise. The machine counts failures afresh for a new
// generation, so a release whose retries are used up is attempted again
// once its spec changes, in values or not. The file's spec is compared as
// written: a field it leaves to a default the API server fills in reads as
// a change.
func nextGeneration(live, fromFile *v2.HelmRelease) int64 {
	if equality.Semantic.DeepEqual(live.Spec, fromFile.Spec) {
		return live.Generation
	}
	return live.Generation + 1
}

// nsFlagSet tells whether -n was given; the file's namespace wins
// otherwise. parse leaves it empty unless given.
func nsFlagSet(o *options) bool { return o.namespaceFlag }

// readHelmRelease reads the one HelmRelease of a file (path names it in
// errors).
func readHelmRelease(path string, data []byte) (*v2.HelmRelease, error) {
	obj := &v2.HelmRelease{}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return nil, fmt.Errorf("reading --file %s: %w", path, err)
	}
	if obj.Kind != helmv2.HelmReleaseKind {
		return nil, fmt.Errorf("reading --file %s: kind %q, want %s", path, obj.Kind, helmv2.HelmReleaseKind)
	}
	return obj, nil
}

// composeValues composes spec.values and spec.valuesFrom as the
// controller does, then merges the local values files over them.
func composeValues(ctx context.Context, c client.Client, obj *v2.HelmRelease, files []string) (map[string]any, *redact.Secrets, error) {
	reader := &redact.Reader{Client: c}
	values, err := chartutil.ChartValuesFromReferences(ctx, logr.Discard(), reader, obj.Namespace, obj.GetValues(), obj.Spec.ValuesFrom...)
	secrets := reader.ForRelease(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("composing the values: %s", secrets.String(err.Error()))
	}
	for _, f := range files {
		v, err := chartcommon.ReadValuesFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("reading values file %s: %w", f, err)
		}
		values = loader.MergeMaps(values, v)
	}
	return values, secrets, nil
}

// loadChart loads the local chart, else the chart the spec's chart
// template asks for when the live source object serves another, else the
// source's artifact. It says where the chart came from. digestPinned is
// the controller's digest tracking (DisableChartDigestTracking off).
func loadChart(ctx context.Context, c client.Client, obj *v2.HelmRelease, o *options, digestPinned bool) (*chartv2.Chart, string, error) {
	if path := o.chart; path != "" {
		chrt, err := loader.Load(path)
		if err != nil {
			return nil, "", fmt.Errorf("loading chart %s: %w", path, err)
		}
		return chrt, "--chart " + path, nil
	}
	change, err := templateChange(ctx, c, obj)
	if err == nil && change == "" {
		change, err = streamSourceChange(ctx, c, obj)
	}
	if err != nil {
		return nil, "", err
	}
	if change != "" {
		resolve := resolveTemplate
		if obj.Spec.Chart == nil {
			resolve = chartRefFromStream
		}
		r, err := resolve(ctx, c, obj, digestPinned)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", change, err)
		}
		return r.chart, fmt.Sprintf("%s, fetched by the plan: %s", r.from, change), nil
	}
	return sourceChart(ctx, clusterOf(c), obj, o.sourceHost, digestPinned)
}

// sourceChart downloads the chart of obj's source as the controller does
// (digest checked), once the source is ready. Its artifact URL must be
// reachable from here: in the cluster, or through a port-forward of
// source-controller given as host (--source-host). The version of a chart
// from an OCI artifact is pinned to its digest as the controller pins it
// (digestPinned).
func sourceChart(ctx context.Context, c client.Client, obj *v2.HelmRelease, host string, digestPinned bool) (*chartv2.Chart, string, error) {
	src, kind, key := sourceOf(obj)
	if src == nil {
		return nil, "", fmt.Errorf("HelmRelease %s/%s has no source of kind HelmChart, OCIRepository or ExternalArtifact (spec.chart, spec.chartRef): plan it with --chart", obj.Namespace, obj.Name)
	}
	if err := c.Get(ctx, key, src); err != nil {
		return nil, "", fmt.Errorf("reading the source %s %s: %w", kind, key, err)
	}
	getter, _ := src.(conditions.Getter)
	if getter == nil || !conditions.IsReady(getter) || src.GetArtifact() == nil {
		why := "no artifact"
		if getter != nil && conditions.GetMessage(getter, meta.ReadyCondition) != "" {
			why = conditions.GetMessage(getter, meta.ReadyCondition)
		}
		return nil, "", fmt.Errorf("source %s %s is not ready: %s", kind, key, why)
	}
	artifact := src.GetArtifact()
	chrt, err := chartsource.New(chartsource.Options{HostOverride: host}).Get(ctx, types.NamespacedName{Namespace: obj.Namespace, Name: obj.Name}, artifact)
	if err != nil {
		return nil, "", fmt.Errorf("fetching the chart of source %s %s (or plan with --chart): %w", kind, key, err)
	}
	loaded, err := chrt.Load()
	if err != nil {
		return nil, "", err
	}
	if digestPinned && chartsource.PinnedToArtifactDigest(kind, artifact.Revision) {
		if loaded.Metadata.Version, _, err = chartsource.PinnedVersion(loaded.Metadata.Version, artifact.Revision); err != nil {
			return nil, "", fmt.Errorf("pinning the chart of source %s %s to its digest: %w", kind, key, err)
		}
	}
	return loaded, fmt.Sprintf("the artifact of %s %s (revision %s)", kind, key, artifact.Revision), nil
}

// artifactSource is a source object with an artifact.
type artifactSource interface {
	client.Object
	GetArtifact() *meta.Artifact
}

// sourceOf is the object serving obj's chart, and its kind: spec.chartRef,
// or the HelmChart or OCIRepository of its chart template; nil without
// either.
func sourceOf(obj *v2.HelmRelease) (artifactSource, string, types.NamespacedName) {
	kind, key := "", types.NamespacedName{}
	if ref := obj.Spec.ChartRef; ref != nil {
		kind, key = ref.Kind, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		if key.Namespace == "" {
			key.Namespace = obj.Namespace
		}
	} else if ref := obj.GetHelmChartTemplateReference(); ref != nil {
		kind, key = ref.Kind, ref.GetObjectKey()
	}
	switch kind {
	case sourcev1.OCIRepositoryKind:
		return &sourcev1.OCIRepository{}, kind, key
	case sourcev1.ExternalArtifactKind:
		return &sourcev1.ExternalArtifact{}, kind, key
	case sourcev1.HelmChartKind:
		return &sourcev1.HelmChart{}, kind, key
	}
	return nil, kind, key
}
