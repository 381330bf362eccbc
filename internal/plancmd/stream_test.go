package plancmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of testdata/")

// The namespaces of the stream fixture: fixed, so that the markdown is
// the same on every run.
const (
	appsNS  = "stream-apps"
	infraNS = "stream-infra"
)

// secretValue is the value a Secret of the stream gives; no output may
// hold it.
const secretValue = "s3cr3t-password"

// streamChartDir writes chart web at version, its objects named after
// the release so that releases of one namespace do not collide; 1.1.0
// adds a second ConfigMap.
func streamChartDir(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":          fmt.Sprintf("apiVersion: v2\nname: web\nversion: %s\n", version),
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: {{ .Values.a | quote }}\n",
		"templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-migrate\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n",
	}
	if version != "1.0.0" {
		files["templates/extra.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\n"
	}
	writeFiles(t, dir, files)
	return dir
}

// hrDoc is a HelmRelease document of chart web from the HelmRepository
// charts of its namespace, as kustomize prints one.
func hrDoc(ns, name, version, extra string) string {
	return fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %s
  namespace: %s
spec:
  interval: 1m
  chart:
    spec:
      chart: web
      version: %s
      sourceRef:
        kind: HelmRepository
        name: charts
%s`, name, ns, version, extra)
}

// streamFixture serves chart web on a chart server and returns the
// output of a `kustomize build` of five HelmReleases in two namespaces,
// written out of order: frontend depends on web, web on
// stream-infra/database, database on crds; unrelated depends on nothing.
// The HelmRepositories, the values ConfigMap and Secret are only in the
// stream; release web is installed at 1.0.0 with a=1, which the
// cluster's copy of its values ConfigMap still gives: only the stream's
// copy (a: from-stream) changes the values. The stream bumps web to
// 1.1.0. Two Namespaces
// and a Kustomization are not planned. normalise replaces the chart
// server's random address.
func streamFixture(t *testing.T) (c *cluster, stream string, normalise func(string) string) {
	t.Helper()
	c = newCluster(t)
	envtestserver.CreateNamespaces(t, kubernetes.NewForConfigOrDie(c.cfg), appsNS, infraNS)
	srv, err := chartserver.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	chart := streamChartDir(t, "1.0.0")
	for _, dir := range []string{chart, streamChartDir(t, "1.1.0")} {
		if _, err := srv.AddChart(dir); err != nil {
			t.Fatal(err)
		}
	}
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-values", Namespace: appsNS}, Data: map[string]string{"values.yaml": "a: \"1\"\n"}}
	if err := c.c.Create(context.Background(), old); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	installed := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: appsNS}}
	installed.Spec.Interval = metav1.Duration{Duration: time.Minute}
	installed.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: "charts"}
	if err := c.c.Create(context.Background(), installed); err == nil {
		installWeb(t, c, installed, chart)
		if err := c.c.Status().Update(context.Background(), installed); err != nil {
			t.Fatal(err)
		}
	} else if !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	repo := func(ns string) string {
		return fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: %s\nspec:\n  interval: 1m\n  url: %s\n", ns, srv.HelmRepositoryURL())
	}
	docs := []string{
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + appsNS + "\n",
		"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + infraNS + "\n",
		"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: apps\n  namespace: flux-system\nspec:\n  path: ./apps\n",
		repo(appsNS), repo(infraNS),
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-values\n  namespace: " + appsNS + "\ndata:\n  values.yaml: |\n    a: from-stream\n",
		"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db-password\n  namespace: " + infraNS + "\nstringData:\n  values.yaml: |\n    password: " + secretValue + "\n",
		hrDoc(appsNS, "frontend", "1.0.0", "  dependsOn:\n  - name: web\n  values:\n    a: front\n"),
		hrDoc(appsNS, "web", "1.1.0", "  dependsOn:\n  - name: database\n    namespace: "+infraNS+"\n  valuesFrom:\n  - kind: ConfigMap\n    name: web-values\n"),
		hrDoc(appsNS, "unrelated", "1.1.0", "  values:\n    a: alone\n"),
		hrDoc(infraNS, "database", "1.0.0", "  dependsOn:\n  - name: crds\n  valuesFrom:\n  - kind: Secret\n    name: db-password\n"),
		hrDoc(infraNS, "crds", "1.0.0", ""),
	}
	normalise = func(s string) string { return chartServerAddress.ReplaceAllString(s, "http://charts.example") }
	return c, "# kustomize build\n---\n" + strings.Join(docs, "---\n"), normalise
}

func runStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := RunWithStdin(context.Background(), args, strings.NewReader(stdin), &out, &errOut, false)
	return code, out.String(), errOut.String()
}

var chartServerAddress = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)

var releaseLine = regexp.MustCompile(`(?m)^release (\S+): next step: (\S+)$`)

// A kustomize build on stdin: every HelmRelease planned once, the
// dependencies first; the stream's HelmRepositories serve the charts, its
// ConfigMap wins over the cluster's copy, its Secret's value is nowhere
// in the output, and the three other documents are counted as ignored.
func TestPlanStreamFromStdin(t *testing.T) {
	c, stream, _ := streamFixture(t)
	code, out, errOut := runStdin(t, stream, "--file", "-", "--kubeconfig", c.kubeconfig)
	if code != ExitChanges || errOut != "" {
		t.Fatalf("exit %d, stderr %q, want %d:\n%s", code, errOut, ExitChanges, out)
	}
	var got []string
	for _, m := range releaseLine.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	want := []string{infraNS + "/crds install", infraNS + "/database install", appsNS + "/web upgrade",
		appsNS + "/frontend install", appsNS + "/unrelated install"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("planned\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{"5 HelmReleases, in dependsOn order; 3 documents of other kinds ignored (1 Kustomization, 2 Namespace)",
		"values changed: a", "chart: web@1.0.0 -> web@1.1.0", "~ ConfigMap/web (data.a)", "+ ConfigMap/web-extra", "+ ConfigMap/unrelated-extra", "HelmRepository " + appsNS + "/charts"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, secretValue) {
		t.Errorf("output holds the Secret's value:\n%s", out)
	}
	t.Logf("\n%s", out)

	// -o json: an array, in the same order; NAME picks one release.
	code, out, errOut = runStdin(t, stream, "--file", "-", "--kubeconfig", c.kubeconfig, "-o", "json", "web")
	var plans []planned
	if err := json.Unmarshal([]byte(out), &plans); err != nil || code != ExitChanges {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if len(plans) != 1 || plans[0].HelmRelease != appsNS+"/web" || plans[0].Preview.Step != "upgrade" || strings.Contains(out, "from-stream") {
		t.Errorf("json of web:\n%s", out)
	}
	if !strings.Contains(errOut, "3 documents of other kinds ignored") {
		t.Errorf("stderr %q lacks the ignored documents", errOut)
	}
}

// -o markdown of the stream is the reviewed testdata/stream.md. Run with
// -update to rewrite it, then read it before committing.
func TestPlanStreamMarkdown(t *testing.T) {
	c, stream, normalise := streamFixture(t)
	file := filepath.Join(t.TempDir(), "build.yaml")
	if err := os.WriteFile(file, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "--file", file, "--kubeconfig", c.kubeconfig, "-o", "markdown")
	if code != ExitChanges || errOut != "" {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	out = normalise(out)
	golden := filepath.Join("testdata", "stream.md")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("markdown differs from %s; got:\n%s", golden, out)
	}
	if strings.Contains(out, secretValue) {
		t.Error("markdown holds the Secret's value")
	}
}

// A cycle in dependsOn is an error naming it, and nothing is planned.
func TestPlanStreamCycle(t *testing.T) {
	c := newCluster(t)
	chart := chartDir(t, "1.0.0")
	stream := hrDoc(c.ns, "a", "1.0.0", "  dependsOn:\n  - name: b\n") + "---\n" +
		hrDoc(c.ns, "b", "1.0.0", "  dependsOn:\n  - name: c\n") + "---\n" +
		hrDoc(c.ns, "c", "1.0.0", "  dependsOn:\n  - name: a\n")
	code, out, errOut := runStdin(t, stream, "--file", "-", "--chart", chart, "--kubeconfig", c.kubeconfig)
	want := fmt.Sprintf("cycle: %[1]s/a -> %[1]s/b -> %[1]s/c -> %[1]s/a", c.ns)
	if code != ExitError || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("exit %d, stdout %q, stderr %q, want %q", code, out, errOut, want)
	}
}

// A release that cannot be planned is reported in its place; the others
// are still planned, and the exit code is 2.
func TestPlanStreamOneFails(t *testing.T) {
	c := newCluster(t)
	chart := chartDir(t, "1.0.0")
	stream := hrDoc(c.ns, "good", "1.0.0", "") + "---\n" +
		hrDoc(c.ns, "bad", "1.0.0", "  valuesFrom:\n  - kind: ConfigMap\n    name: missing\n")
	code, out, errOut := runStdin(t, stream, "--file", "-", "--chart", chart, "--kubeconfig", c.kubeconfig)
	if code != ExitError || errOut != "" {
		t.Fatalf("exit %d, stderr %q, want %d", code, errOut, ExitError)
	}
	for _, s := range []string{"release " + c.ns + "/good: next step: install",
		"HelmRelease " + c.ns + "/bad: error: composing the values: could not resolve ConfigMap chart values reference '" + c.ns + "/missing'"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
}

// One HelmRelease on stdin is planned as a file of one document is; -o
// markdown gives its section and the settings.
func TestPlanMarkdownOfOneReleaseFromStdin(t *testing.T) {
	c := newCluster(t)
	code, out, errOut := runStdin(t, hrDoc(c.ns, "web", "1.0.0", ""), "--file", "-", "--chart", chartDir(t, "1.0.0"),
		"--kubeconfig", c.kubeconfig, "-o", "markdown")
	if code != ExitChanges || errOut != "" {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	for _, s := range []string{"### " + c.ns + "/web\n", "**install** (Absent: no release in storage)",
		"- created: `ConfigMap/web`", "<details><summary>controller settings"} {
		if !strings.Contains(out, s) {
			t.Errorf("markdown lacks %q:\n%s", s, out)
		}
	}
	if strings.Contains(out, "HelmReleases") {
		t.Errorf("one release printed as a stream:\n%s", out)
	}
}

// The stream's sources are what the plan fetches from: a HelmRepository
// whose URL differs from the cluster's copy (whose HelmChart serves no
// artifact), and an OCIRepository of spec.chartRef the cluster does not
// hold yet. An interval alone is no change of the repository.
func TestPlanStreamSources(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	srv, err := chartserver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	for _, v := range []string{"1.0.0", "1.1.0"} {
		if _, err := srv.AddChart(streamChartDir(t, v)); err != nil {
			t.Fatal(err)
		}
	}
	liveRepo := &sourcev1.HelmRepository{ObjectMeta: metav1.ObjectMeta{Name: "charts", Namespace: c.ns},
		Spec: sourcev1.HelmRepositorySpec{URL: "http://127.0.0.1:1/gone", Interval: metav1.Duration{Duration: time.Minute}}}
	liveChart := &sourcev1.HelmChart{ObjectMeta: metav1.ObjectMeta{Name: c.ns + "-web", Namespace: c.ns},
		Spec: sourcev1.HelmChartSpec{Chart: "web", Version: "1.0.0", Interval: metav1.Duration{Duration: time.Minute},
			SourceRef: sourcev1.LocalHelmChartSourceReference{Kind: sourcev1.HelmRepositoryKind, Name: "charts"}}}
	for _, o := range []client.Object{liveRepo, liveChart} {
		if err := c.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	repo := func(url, interval string) string {
		return fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: charts\n  namespace: %s\nspec:\n  interval: %s\n  url: %s\n", c.ns, interval, url)
	}
	oci := fmt.Sprintf("apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: app\n  namespace: %s\nspec:\n  interval: 1m\n  insecure: true\n  url: %s/web\n  ref:\n    tag: 1.1.0\n", c.ns, srv.OCIRepositoryURL())
	app := fmt.Sprintf("apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: app\n  namespace: %s\nspec:\n  interval: 1m\n  chartRef:\n    kind: OCIRepository\n    name: app\n", c.ns)

	stream := strings.Join([]string{repo(srv.HelmRepositoryURL(), "1m"), hrDoc(c.ns, "web", "1.0.0", ""), oci, app}, "---\n")
	code, out, errOut := runStdin(t, stream, "--file", "-", "--kubeconfig", c.kubeconfig)
	if code != ExitChanges || errOut != "" {
		t.Fatalf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	for _, s := range []string{
		"fetched by the plan: HelmRepository " + c.ns + "/charts of --file differs from the cluster's",
		"fetched by the plan: no OCIRepository " + c.ns + "/app exists yet",
		"chart: web@1.1.0", "+ ConfigMap/app-extra"} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}

	// The cluster's URL with another interval: the plan reads the live
	// HelmChart, which has no artifact.
	stream = repo(liveRepo.Spec.URL, "5m") + "---\n" + hrDoc(c.ns, "web", "1.0.0", "")
	code, out, _ = runStdin(t, stream, "--file", "-", "--kubeconfig", c.kubeconfig, "-o", "json")
	if code != ExitError || !strings.Contains(out, "source HelmChart "+c.ns+"/"+c.ns+"-web is not ready: no artifact") {
		t.Errorf("exit %d, want %d and the live HelmChart read:\n%s", code, ExitError, out)
	}
}
