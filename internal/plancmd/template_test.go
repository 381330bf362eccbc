package plancmd

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
)

// chartDirWithExtra is chartDir with one more object at version 1.1.0 and
// a values file for spec.chart.spec.valuesFiles.
func chartDirWithExtra(t *testing.T, version string) string {
	t.Helper()
	dir := chartDir(t, version)
	extra := map[string]string{
		"templates/extra.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-extra\n",
		"values-prod.yaml":     "a: prod\n",
	}
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// chartRepositories serves web 1.0.0 and 1.1.0 (which adds web-extra) on
// an HTTP chart repository and an OCI registry, and creates a
// HelmRepository of each in c's namespace, and the HelmChart the
// controller built for a release at 1.0.0.
func chartRepositories(t *testing.T, c *cluster) *chartserver.Server {
	t.Helper()
	ctx := context.Background()
	srv, err := chartserver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	if _, err := srv.AddChart(chartDir(t, "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.AddChart(chartDirWithExtra(t, "1.1.0")); err != nil {
		t.Fatal(err)
	}
	objects := []client.Object{
		&sourcev1.HelmRepository{ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: c.ns},
			Spec: sourcev1.HelmRepositorySpec{URL: srv.HelmRepositoryURL(), Interval: metav1.Duration{Duration: time.Minute}}},
		&sourcev1.HelmRepository{ObjectMeta: metav1.ObjectMeta{Name: "charts-oci", Namespace: c.ns},
			Spec: sourcev1.HelmRepositorySpec{URL: srv.OCIRepositoryURL(), Type: sourcev1.HelmRepositoryTypeOCI, Insecure: true,
				Interval: metav1.Duration{Duration: time.Minute}}},
		&sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: c.ns + "-web", Namespace: c.ns},
			Spec: sourcev1.HelmChartSpec{Chart: "web", Version: "1.0.0", Interval: metav1.Duration{Duration: time.Minute},
				SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}},
	}
	for _, obj := range objects {
		if err := c.c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return srv
}

func templateFile(t *testing.T, ns string, chart *helmv2.HelmChartTemplate) string {
	t.Helper()
	hr := &v2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{APIVersion: v2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
	}
	hr.Spec.Interval = metav1.Duration{Duration: time.Minute}
	hr.Spec.Chart = chart
	data, err := yaml.Marshal(hr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hr.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fromRepository(repo, version string, valuesFiles ...string) *helmv2.HelmChartTemplate {
	return &helmv2.HelmChartTemplate{Spec: helmv2.HelmChartTemplateSpec{
		Chart: "web", Version: version, ValuesFiles: valuesFiles,
		SourceRef: &helmv2.CrossNamespaceObjectReference{Kind: sourcev1.HelmRepositoryKind, Name: repo},
	}}
}

// A change to the chart template is planned with the chart it asks for,
// fetched by the plan from the chart repository, not with the live
// HelmChart's artifact, which the controller built from the live spec.
func TestPlanFetchesTheChartAChangeAsksFor(t *testing.T) {
	c := newCluster(t)
	srv := chartRepositories(t, c)
	for _, tc := range []struct {
		name     string
		template *helmv2.HelmChartTemplate
		want     []string // in the output
		wantErr  string
	}{
		{"a version bump, HTTP repository", fromRepository("charts", "1.1.0"),
			[]string{"chart: web@1.1.0", "web-extra", "chart from: HelmRepository " + c.ns + "/charts (" + srv.HelmRepositoryURL() + "/web-1.1.0.tgz)",
				"HelmChart " + c.ns + "/" + c.ns + "-web serves web@1.0.0 from HelmRepository/charts, the change asks for web@1.1.0 from HelmRepository/charts"}, ""},
		{"a semver range, HTTP repository", fromRepository("charts", ">=1.0.0 <2.0.0"),
			[]string{"chart: web@1.1.0", "web-extra"}, ""},
		{"a version bump, OCI HelmRepository", fromRepository("charts-oci", "1.1.0"),
			[]string{"chart: web@1.1.0", "web-extra", "chart from: HelmRepository " + c.ns + "/charts-oci (OCI "}, ""},
		{"another source, same version", fromRepository("charts-oci", "1.0.0"),
			[]string{"chart: web@1.0.0", "the change asks for web@1.0.0 from HelmRepository/charts-oci"}, ""},
		{"an OCIRepository template: the version pinned to the digest", &helmv2.HelmChartTemplate{Kind: sourcev1.OCIRepositoryKind,
			Spec: helmv2.HelmChartTemplateSpec{OCIRepositorySpec: sourcev1.OCIRepositorySpec{
				URL: srv.OCIRepositoryURL() + "/web", Reference: &sourcev1.OCIRepositoryRef{Tag: "1.1.0"}, Insecure: true}}},
			[]string{"chart: web@1.1.0+", "no OCIRepository " + c.ns + "/" + c.ns + "-web exists yet"}, ""},
		{"values files merged as source-controller packages them", fromRepository("charts", "1.1.0", "values-prod.yaml"),
			[]string{"chart: web@1.1.0", "the change asks for web@1.1.0 from HelmRepository/charts with values files values-prod.yaml"}, ""},
		{"a version the repository does not have", fromRepository("charts", "9.9.9"),
			nil, "the index has no chart web matching version 9.9.9"},
		{"a missing values file", fromRepository("charts", "1.1.0", "values-nope.yaml"),
			nil, "chart web has no values file values-nope.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := templateFile(t, c.ns, tc.template)
			code, out, errOut := run(t, "--file", file, "--kubeconfig", c.kubeconfig)
			if tc.wantErr != "" {
				if code != ExitError || !strings.Contains(errOut, tc.wantErr) {
					t.Fatalf("exit %d, want %d with %q; stderr %q", code, ExitError, tc.wantErr, errOut)
				}
				return
			}
			if code != ExitChanges {
				t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// spec.chart.spec.valuesFiles replace the chart's values with those files
// merged in order, values.yaml only when listed, as source-controller
// packages them.
func TestMergeValuesFiles(t *testing.T) {
	for _, tc := range []struct {
		name          string
		files         []string
		ignoreMissing bool
		want          map[string]any
		wantErr       bool
	}{
		{"none: the chart's own values", nil, false, map[string]any{"a": "default"}, false},
		{"one file replaces values.yaml", []string{"values-prod.yaml"}, false, map[string]any{"a": "prod"}, false},
		{"later files win", []string{"values-prod.yaml", "values.yaml"}, false, map[string]any{"a": "default"}, false},
		{"a missing file fails", []string{"values-nope.yaml"}, false, nil, true},
		{"a missing file ignored when asked", []string{"values-nope.yaml", "./values-prod.yaml"}, true, map[string]any{"a": "prod"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chrt := &chartv2.Chart{Metadata: &chartv2.Metadata{Name: "web"}, Values: map[string]any{"a": "default"}, Raw: []*chartcommon.File{
				{Name: "values.yaml", Data: []byte("a: default\n")},
				{Name: "values-prod.yaml", Data: []byte("a: prod\n")},
			}}
			err := mergeValuesFiles(chrt, tc.files, tc.ignoreMissing)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got values %v, want an error", chrt.Values)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(chrt.Values, tc.want) {
				t.Errorf("values %v, want %v", chrt.Values, tc.want)
			}
		})
	}
}
