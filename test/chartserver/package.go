package chartserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"
)

// Option changes how AddChart packages a chart directory.
type Option func(*options)

type options struct {
	name       string
	version    string
	appVersion string
	values     map[string]any
	ociTag     string
	// keepChartYAML writes each Chart.yaml as the directory has it.
	keepChartYAML bool
}

// KeepChartYAML packages every Chart.yaml (the chart's and its subcharts')
// with the fields Helm's loader does not know, such as a dependency's
// depends-on (HIP-0025), instead of re-marshalling what the loader
// understood as `helm package` does. The name and version options still
// apply to the chart's own Chart.yaml.
func KeepChartYAML() Option {
	return func(o *options) { o.keepChartYAML = true }
}

// WithVersion publishes the chart under version instead of the one in
// Chart.yaml. It must be valid SemVer.
func WithVersion(version string) Option {
	return func(o *options) { o.version = version }
}

// WithName publishes the chart under name instead of the one in Chart.yaml.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}

// WithOCITag pushes the chart to the OCI registry under tag instead of its
// version, as someone tagging a chart by hand might; the HelmRepository
// still lists it under its version.
func WithOCITag(tag string) Option {
	return func(o *options) { o.ociTag = tag }
}

// WithAppVersion overrides appVersion in Chart.yaml.
func WithAppVersion(appVersion string) Option {
	return func(o *options) { o.appVersion = appVersion }
}

// WithValues deep-merges values over the chart's values.yaml, so a variant
// of a chart can differ in its defaults. Several WithValues options are
// merged in order. The rewritten values.yaml loses its comments.
func WithValues(values map[string]any) Option {
	return func(o *options) {
		o.values = loader.MergeMaps(o.values, values)
	}
}

// packagedChart is a chart archive ready to be published.
type packagedChart struct {
	metadata *chart.Metadata
	fileName string
	data     []byte
	// digestHex is the hex sha256 of data, the form index.yaml expects.
	digestHex string
}

// packageChart loads the chart directory dir, applies opts and returns the
// packaged archive. workDir receives the temporary archive; dir is never
// written to.
func packageChart(dir, workDir string, opts options) (*packagedChart, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart directory %q: %w", dir, err)
	}
	if err := applyOptions(ch, opts); err != nil {
		return nil, err
	}

	outDir, err := os.MkdirTemp(workDir, "package-*")
	if err != nil {
		return nil, fmt.Errorf("creating packaging directory: %w", err)
	}
	defer os.RemoveAll(outDir)

	path, err := chartutil.Save(ch, outDir)
	if err != nil {
		return nil, fmt.Errorf("packaging chart %q: %w", dir, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading packaged chart: %w", err)
	}
	if opts.keepChartYAML {
		if data, err = restoreChartYAMLs(data, dir, ch.Name(), opts); err != nil {
			return nil, fmt.Errorf("packaging chart %q: %w", dir, err)
		}
	}

	sum := sha256.Sum256(data)
	return &packagedChart{
		metadata:  ch.Metadata,
		fileName:  filepath.Base(path),
		data:      data,
		digestHex: hex.EncodeToString(sum[:]),
	}, nil
}

func applyOptions(ch *chart.Chart, opts options) error {
	if ch.Metadata == nil {
		return fmt.Errorf("chart has no metadata")
	}
	if opts.name != "" {
		ch.Metadata.Name = opts.name
	}
	if opts.version != "" {
		ch.Metadata.Version = opts.version
	}
	if opts.appVersion != "" {
		ch.Metadata.AppVersion = opts.appVersion
	}
	if len(opts.values) > 0 {
		if err := overrideValues(ch, opts.values); err != nil {
			return err
		}
	}
	// Catch bad names and versions here, with the caller's context, rather
	// than deep inside packaging or the registry push.
	if err := ch.Validate(); err != nil {
		return fmt.Errorf("invalid chart metadata: %w", err)
	}
	return nil
}

// overrideValues merges overrides into the chart's values. The packager
// writes values.yaml from the raw file rather than from ch.Values, so the
// raw file is replaced too.
func overrideValues(ch *chart.Chart, overrides map[string]any) error {
	merged := loader.MergeMaps(ch.Values, overrides)
	data, err := yaml.Marshal(merged)
	if err != nil {
		return fmt.Errorf("encoding overridden values: %w", err)
	}
	ch.Values = merged

	for _, f := range ch.Raw {
		if f.Name == chartutil.ValuesfileName {
			f.Data = data
			return nil
		}
	}
	ch.Raw = append(ch.Raw, &common.File{
		Name:    chartutil.ValuesfileName,
		Data:    data,
		ModTime: time.Now(),
	})
	return nil
}
