package chartserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// restoreChartYAMLs rewrites the Chart.yaml entries of a packaged chart
// (archive, rooted at name/) from the chart directory dir, so that fields
// Helm's loader drops survive. The root Chart.yaml gets the name and
// version of opts; every file is re-encoded from a generic map, which
// keeps all fields.
func restoreChartYAMLs(archive []byte, dir, name string, opts options) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	tw := tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		if path.Base(hdr.Name) == "Chart.yaml" {
			rel := strings.TrimPrefix(path.Dir(hdr.Name), name)
			original, err := originalChartYAML(filepath.Join(dir, filepath.FromSlash(rel), "Chart.yaml"), rel == "", opts)
			switch {
			case errors.Is(err, os.ErrNotExist):
				// A subchart shipped as an archive in charts/: Helm's
				// loader read it from there; its own Chart.yaml stays.
			case err != nil:
				return nil, err
			default:
				data = original
				hdr.Size = int64(len(data))
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// originalChartYAML reads a Chart.yaml as written, with the name and
// version options applied to the root chart's.
func originalChartYAML(file string, root bool, opts options) ([]byte, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	fields := map[string]any{}
	if err := yaml.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if root {
		if opts.name != "" {
			fields["name"] = opts.name
		}
		if opts.version != "" {
			fields["version"] = opts.version
		}
		if opts.appVersion != "" {
			fields["appVersion"] = opts.appVersion
		}
	}
	return yaml.Marshal(fields)
}
