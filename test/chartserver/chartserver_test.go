package chartserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/downloader"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/registry"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/afterhooks/helm-controller/test/testcharts"
)

// The charts come from the repository, so these tests run on any clone:
// podinfo, and a second chart written for the tests.
var (
	podinfoDir = testcharts.Podinfo
	secondDir  = filepath.Join(testcharts.Dir, "afterhooks-deadlock")
)

func startServer(t *testing.T) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func addChart(t *testing.T, s *Server, dir string, opts ...Option) ChartRef {
	t.Helper()
	ref, err := s.AddChart(dir, opts...)
	if err != nil {
		t.Fatalf("AddChart(%s): %v", dir, err)
	}
	return ref
}

func httpGet(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	return body
}

func fetchIndex(t *testing.T, s *Server) *repo.IndexFile {
	t.Helper()
	data := httpGet(t, s.HelmRepositoryURL()+"/index.yaml")
	path := filepath.Join(t.TempDir(), "index.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	idx, err := repo.LoadIndexFile(path)
	if err != nil {
		t.Fatalf("loading served index.yaml: %v", err)
	}
	return idx
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func newRegistryClient(t *testing.T) *registry.Client {
	t.Helper()
	c, err := registry.NewClient(
		registry.ClientOptPlainHTTP(),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")),
	)
	if err != nil {
		t.Fatalf("registry.NewClient: %v", err)
	}
	return c
}

func TestStartListensOnLoopback(t *testing.T) {
	s := startServer(t)

	if !strings.HasPrefix(s.HelmRepositoryURL(), "http://127.0.0.1:") {
		t.Errorf("HelmRepositoryURL = %q, want http://127.0.0.1:PORT", s.HelmRepositoryURL())
	}
	if !strings.HasPrefix(s.OCIRepositoryURL(), "oci://127.0.0.1:") || !strings.HasSuffix(s.OCIRepositoryURL(), "/charts") {
		t.Errorf("OCIRepositoryURL = %q, want oci://127.0.0.1:PORT/charts", s.OCIRepositoryURL())
	}

	// An empty repository must still serve a valid index.
	idx := fetchIndex(t, s)
	if len(idx.Entries) != 0 {
		t.Errorf("empty server has entries: %v", idx.Entries)
	}
}

func TestHelmRepositoryServesVersions(t *testing.T) {
	s := startServer(t)
	refs := []ChartRef{
		addChart(t, s, podinfoDir, WithVersion("6.0.0")),
		addChart(t, s, podinfoDir, WithVersion("6.0.1")),
	}

	idx := fetchIndex(t, s)
	versions := idx.Entries["podinfo"]
	if len(versions) != 2 {
		t.Fatalf("index has %d podinfo versions, want 2", len(versions))
	}
	for _, ref := range refs {
		t.Run(ref.Version, func(t *testing.T) {
			cv, err := idx.Get("podinfo", ref.Version)
			if err != nil {
				t.Fatalf("index.Get: %v", err)
			}
			if cv.Version != ref.Version {
				t.Errorf("index version = %q, want %q", cv.Version, ref.Version)
			}
			wantURL := fmt.Sprintf("%s/podinfo-%s.tgz", s.HelmRepositoryURL(), ref.Version)
			if len(cv.URLs) != 1 || cv.URLs[0] != wantURL || ref.URL != wantURL {
				t.Errorf("urls = %v, ref.URL = %q, want %q", cv.URLs, ref.URL, wantURL)
			}
			if cv.Created.IsZero() {
				t.Error("index entry has no created time")
			}

			archive := httpGet(t, wantURL)
			if got := sha256Hex(archive); got != cv.Digest || "sha256:"+got != ref.Digest {
				t.Errorf("archive sha256 = %s, index digest = %s, ref digest = %s", got, cv.Digest, ref.Digest)
			}

			ch, err := loader.LoadArchive(bytes.NewReader(archive))
			if err != nil {
				t.Fatalf("loading served archive: %v", err)
			}
			if ch.Name() != "podinfo" || ch.Metadata.Version != ref.Version {
				t.Errorf("archive chart = %s %s, want podinfo %s", ch.Name(), ch.Metadata.Version, ref.Version)
			}
			if len(ch.Templates) == 0 {
				t.Error("archive has no templates")
			}
		})
	}
}

func TestHelmRepositoryNotFound(t *testing.T) {
	s := startServer(t)
	addChart(t, s, podinfoDir, WithVersion("6.0.0"))

	for _, path := range []string{"/podinfo-9.9.9.tgz", "/", "/charts/podinfo"} {
		resp, err := http.Get(s.HelmRepositoryURL() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, resp.StatusCode)
		}
	}
}

// TestHelmChartRepositoryClient resolves charts the way the Helm CLI does: a
// named repository entry, a downloaded index and a version constraint.
func TestHelmChartRepositoryClient(t *testing.T) {
	s := startServer(t)
	addChart(t, s, podinfoDir, WithVersion("6.0.0"))
	want := addChart(t, s, podinfoDir, WithVersion("6.0.1"))
	addChart(t, s, podinfoDir, WithVersion("6.1.0"))

	cacheDir := t.TempDir()
	entry := &repo.Entry{Name: "local", URL: s.HelmRepositoryURL()}
	cr, err := repo.NewChartRepository(entry, getter.Getters())
	if err != nil {
		t.Fatalf("NewChartRepository: %v", err)
	}
	cr.CachePath = cacheDir
	if _, err := cr.DownloadIndexFile(); err != nil {
		t.Fatalf("DownloadIndexFile: %v", err)
	}

	repoFile := repo.NewFile()
	repoFile.Add(entry)
	repoConfig := filepath.Join(t.TempDir(), "repositories.yaml")
	if err := repoFile.WriteFile(repoConfig, 0o600); err != nil {
		t.Fatal(err)
	}

	dl := &downloader.ChartDownloader{
		Out:              io.Discard,
		Getters:          getter.Getters(),
		RepositoryConfig: repoConfig,
		RepositoryCache:  cacheDir,
		ContentCache:     t.TempDir(),
	}
	digest, u, err := dl.ResolveChartVersion("local/podinfo", "~6.0.0")
	if err != nil {
		t.Fatalf("ResolveChartVersion: %v", err)
	}
	if u.String() != want.URL || "sha256:"+digest != want.Digest {
		t.Errorf("resolved %s (%s), want %s (%s)", u, digest, want.URL, want.Digest)
	}

	dest := t.TempDir()
	path, _, err := dl.DownloadTo("local/podinfo", "~6.0.0", dest)
	if err != nil {
		t.Fatalf("DownloadTo: %v", err)
	}
	ch, err := loader.Load(path)
	if err != nil {
		t.Fatalf("loading downloaded chart: %v", err)
	}
	if ch.Metadata.Version != "6.0.1" {
		t.Errorf("downloaded version %s, want 6.0.1", ch.Metadata.Version)
	}

	// FindChartInRepoURL caches the index under the Helm cache home.
	t.Setenv("HELM_CACHE_HOME", t.TempDir())
	found, err := repo.FindChartInRepoURL(s.HelmRepositoryURL(), "podinfo", getter.Getters(),
		repo.WithChartVersion(">=6.1.0"))
	if err != nil {
		t.Fatalf("FindChartInRepoURL: %v", err)
	}
	if want := s.HelmRepositoryURL() + "/podinfo-6.1.0.tgz"; found != want {
		t.Errorf("FindChartInRepoURL = %s, want %s", found, want)
	}
}

func TestOCIRegistryWithHelmClient(t *testing.T) {
	s := startServer(t)
	refs := []ChartRef{
		addChart(t, s, podinfoDir, WithVersion("6.0.0")),
		addChart(t, s, podinfoDir, WithVersion("6.0.1")),
	}
	client := newRegistryClient(t)
	repoRef := strings.TrimPrefix(s.OCIRepositoryURL(), "oci://") + "/podinfo"

	tags, err := client.Tags(repoRef)
	if err != nil {
		t.Fatalf("Tags: %v", err)
	}
	slices.Sort(tags)
	if !slices.Equal(tags, []string{"6.0.0", "6.0.1"}) {
		t.Errorf("tags = %v, want [6.0.0 6.0.1]", tags)
	}

	for _, ref := range refs {
		t.Run(ref.Version, func(t *testing.T) {
			wantRef := s.OCIRepositoryURL() + "/podinfo:" + ref.Version
			if ref.OCIReference != wantRef {
				t.Errorf("OCIReference = %q, want %q", ref.OCIReference, wantRef)
			}

			res, err := client.Pull(strings.TrimPrefix(ref.OCIReference, "oci://"))
			if err != nil {
				t.Fatalf("Pull: %v", err)
			}
			if res.Chart.Meta.Name != "podinfo" || res.Chart.Meta.Version != ref.Version {
				t.Errorf("pulled %s %s, want podinfo %s", res.Chart.Meta.Name, res.Chart.Meta.Version, ref.Version)
			}
			if res.Chart.Digest != ref.Digest {
				t.Errorf("chart layer digest = %s, want %s", res.Chart.Digest, ref.Digest)
			}
			if res.Manifest.Digest != ref.OCIManifestDigest {
				t.Errorf("manifest digest = %s, want %s", res.Manifest.Digest, ref.OCIManifestDigest)
			}

			var m ocispec.Manifest
			if err := json.Unmarshal(res.Manifest.Data, &m); err != nil {
				t.Fatalf("decoding manifest: %v", err)
			}
			checkHelmManifest(t, m.Config.MediaType, layerMediaTypes(m.Layers))

			ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
			if err != nil {
				t.Fatalf("loading pulled chart: %v", err)
			}
			if ch.Metadata.Version != ref.Version {
				t.Errorf("pulled archive version %s, want %s", ch.Metadata.Version, ref.Version)
			}
		})
	}
}

func layerMediaTypes(layers []ocispec.Descriptor) []string {
	out := make([]string, 0, len(layers))
	for _, l := range layers {
		out = append(out, l.MediaType)
	}
	return out
}

func checkHelmManifest(t *testing.T, configType string, layerTypes []string) {
	t.Helper()
	if configType != registry.ConfigMediaType {
		t.Errorf("config media type = %q, want %q", configType, registry.ConfigMediaType)
	}
	if !slices.Equal(layerTypes, []string{registry.ChartLayerMediaType}) {
		t.Errorf("layer media types = %v, want [%s]", layerTypes, registry.ChartLayerMediaType)
	}
}

// TestOCIRegistryDistributionAPI reads the artifact over the plain OCI
// distribution API, as source-controller's OCIRepository does: resolve the
// tag to a manifest, select the layer by media type and fetch its blob.
func TestOCIRegistryDistributionAPI(t *testing.T) {
	s := startServer(t)
	want := addChart(t, s, podinfoDir, WithVersion("6.0.1"))
	base := "http://" + strings.TrimPrefix(s.OCIRepositoryURL(), "oci://")
	base = strings.TrimSuffix(base, "/charts") + "/v2/charts/podinfo"

	req, err := http.NewRequest(http.MethodGet, base+"/manifests/6.0.1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", ocispec.MediaTypeImageManifest)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET manifest: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET manifest: status %d, %v: %s", resp.StatusCode, err, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != ocispec.MediaTypeImageManifest {
		t.Errorf("manifest Content-Type = %q, want %q", ct, ocispec.MediaTypeImageManifest)
	}
	if got := "sha256:" + sha256Hex(body); got != want.OCIManifestDigest {
		t.Errorf("manifest digest = %s, want %s", got, want.OCIManifestDigest)
	}

	var m ocispec.Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("decoding manifest: %v", err)
	}
	checkHelmManifest(t, m.Config.MediaType, layerMediaTypes(m.Layers))
	if m.Annotations[ocispec.AnnotationVersion] != "6.0.1" || m.Annotations[ocispec.AnnotationTitle] != "podinfo" {
		t.Errorf("manifest annotations = %v", m.Annotations)
	}
	if len(m.Layers) != 1 {
		t.Fatalf("manifest has %d layers, want 1", len(m.Layers))
	}

	// The chart layer must be the very archive the HTTP repository serves.
	layer := httpGet(t, base+"/blobs/"+m.Layers[0].Digest.String())
	if got := "sha256:" + sha256Hex(layer); got != want.Digest {
		t.Errorf("layer digest = %s, want %s", got, want.Digest)
	}
	if !bytes.Equal(layer, httpGet(t, want.URL)) {
		t.Error("OCI layer differs from the HTTP repository archive")
	}

	var cfg chart.Metadata
	if err := json.Unmarshal(httpGet(t, base+"/blobs/"+m.Config.Digest.String()), &cfg); err != nil {
		t.Fatalf("decoding config blob: %v", err)
	}
	if cfg.Name != "podinfo" || cfg.Version != "6.0.1" {
		t.Errorf("config = %s %s, want podinfo 6.0.1", cfg.Name, cfg.Version)
	}
}

func TestAddChartVariants(t *testing.T) {
	s := startServer(t)
	original, err := loader.LoadDir(podinfoDir)
	if err != nil {
		t.Fatal(err)
	}
	valuesBefore, err := os.ReadFile(filepath.Join(podinfoDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	ref := addChart(t, s, podinfoDir,
		WithName("podinfo-variant"),
		WithVersion("1.2.3-rc.1"),
		WithAppVersion("9.9.9"),
		WithValues(map[string]any{"replicaCount": 3, "ui": map[string]any{"message": "from variant"}}),
		WithValues(map[string]any{"ui": map[string]any{"color": "#123456"}}),
	)
	if ref.Name != "podinfo-variant" || ref.Version != "1.2.3-rc.1" {
		t.Fatalf("ref = %+v", ref)
	}

	ch, err := loader.LoadArchive(bytes.NewReader(httpGet(t, ref.URL)))
	if err != nil {
		t.Fatalf("loading variant: %v", err)
	}
	if ch.Name() != "podinfo-variant" || ch.Metadata.Version != "1.2.3-rc.1" || ch.Metadata.AppVersion != "9.9.9" {
		t.Errorf("variant metadata = %s %s app %s", ch.Name(), ch.Metadata.Version, ch.Metadata.AppVersion)
	}

	ui, _ := ch.Values["ui"].(map[string]any)
	if got := fmt.Sprint(ch.Values["replicaCount"]); got != "3" {
		t.Errorf("replicaCount = %s, want 3", got)
	}
	if ui["message"] != "from variant" || ui["color"] != "#123456" {
		t.Errorf("ui = %v, want overridden message and color", ui)
	}
	// Keys that were not overridden keep their original values.
	origUI, _ := original.Values["ui"].(map[string]any)
	if fmt.Sprint(ui["logo"]) != fmt.Sprint(origUI["logo"]) {
		t.Errorf("ui.logo = %v, want untouched %v", ui["logo"], origUI["logo"])
	}
	if fmt.Sprint(ch.Values["image"]) != fmt.Sprint(original.Values["image"]) {
		t.Errorf("image = %v, want untouched %v", ch.Values["image"], original.Values["image"])
	}

	valuesAfter, err := os.ReadFile(filepath.Join(podinfoDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(valuesBefore, valuesAfter) {
		t.Error("source values.yaml was modified")
	}

	res, err := newRegistryClient(t).Pull(strings.TrimPrefix(ref.OCIReference, "oci://"))
	if err != nil {
		t.Fatalf("Pull variant: %v", err)
	}
	if res.Chart.Meta.Name != "podinfo-variant" || res.Chart.Digest != ref.Digest {
		t.Errorf("pulled %s with digest %s, want podinfo-variant %s", res.Chart.Meta.Name, res.Chart.Digest, ref.Digest)
	}
}

func TestSecondChart(t *testing.T) {
	s := startServer(t)
	podinfo := addChart(t, s, podinfoDir)
	second := addChart(t, s, secondDir)

	src, err := loader.LoadDir(secondDir)
	if err != nil {
		t.Fatal(err)
	}
	if second.Name != src.Name() || second.Version != src.Metadata.Version {
		t.Errorf("second chart ref = %s %s, want %s %s", second.Name, second.Version, src.Name(), src.Metadata.Version)
	}

	idx := fetchIndex(t, s)
	for _, ref := range []ChartRef{podinfo, second} {
		cv, err := idx.Get(ref.Name, ref.Version)
		if err != nil {
			t.Errorf("index.Get(%s, %s): %v", ref.Name, ref.Version, err)
			continue
		}
		if "sha256:"+cv.Digest != ref.Digest {
			t.Errorf("%s index digest = %s, want %s", ref.Name, cv.Digest, ref.Digest)
		}
	}

	res, err := newRegistryClient(t).Pull(strings.TrimPrefix(second.OCIReference, "oci://"))
	if err != nil {
		t.Fatalf("Pull the second chart: %v", err)
	}
	var loaded *chart.Chart
	if loaded, err = loader.LoadArchive(bytes.NewReader(res.Chart.Data)); err != nil {
		t.Fatalf("loading the pulled second chart: %v", err)
	}
	if loaded.Name() != src.Name() || len(loaded.Templates) != len(src.Templates) {
		t.Errorf("pulled %s with %d templates, want %s with %d", loaded.Name(), len(loaded.Templates), src.Name(), len(src.Templates))
	}
}

func TestAddChartErrors(t *testing.T) {
	s := startServer(t)
	addChart(t, s, podinfoDir, WithVersion("6.0.0"))

	tests := []struct {
		name    string
		dir     string
		opts    []Option
		wantErr error
	}{
		{name: "duplicate version", dir: podinfoDir, opts: []Option{WithVersion("6.0.0")}, wantErr: ErrChartExists},
		{name: "invalid version", dir: podinfoDir, opts: []Option{WithVersion("not-semver")}},
		{name: "invalid name", dir: podinfoDir, opts: []Option{WithName("bad/name")}},
		{name: "missing directory", dir: filepath.Join(t.TempDir(), "nope")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.AddChart(tt.dir, tt.opts...)
			if err == nil {
				t.Fatal("AddChart succeeded, want error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}

	// Failed additions must not leak into the index.
	if got := len(fetchIndex(t, s).Entries["podinfo"]); got != 1 {
		t.Errorf("index has %d podinfo versions after failures, want 1", got)
	}
}

func TestConcurrentAddChart(t *testing.T) {
	s := startServer(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AddChart(podinfoDir, WithVersion(fmt.Sprintf("7.0.%d", i)))
			errs <- err
		}()
		// Read concurrently with the writers.
		go func() { _, _ = http.Get(s.HelmRepositoryURL() + "/index.yaml") }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("AddChart: %v", err)
		}
	}
	if got := len(fetchIndex(t, s).Entries["podinfo"]); got != n {
		t.Errorf("index has %d versions, want %d", got, n)
	}
}

func TestStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer s.Close()
	httpGet(t, s.HelmRepositoryURL()+"/index.yaml")

	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.AddChart(podinfoDir)
		if errors.Is(err, ErrClosed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("AddChart after cancel: %v, want ErrClosed", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	client := &http.Client{Timeout: 2 * time.Second}
	for _, u := range []string{s.HelmRepositoryURL() + "/index.yaml", "http://" + strings.TrimPrefix(s.OCIRepositoryURL(), "oci://")} {
		if resp, err := client.Get(u); err == nil {
			resp.Body.Close()
			t.Errorf("GET %s still answered after cancel", u)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// KeepChartYAML keeps the fields Helm's loader drops (a dependency's
// depends-on, HIP-0025) in the chart's and its subcharts' Chart.yaml, where
// plain packaging loses them.
func TestAddChartKeepChartYAML(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":                 "apiVersion: v2\nname: platform\nversion: 0.1.0\ndependencies:\n- name: db\n  version: 0.1.0\n- name: api\n  version: 0.1.0\n  depends-on: [db]\n",
		"templates/cm.yaml":          "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		"charts/db/Chart.yaml":       "apiVersion: v2\nname: db\nversion: 0.1.0\nx-note: kept\n",
		"charts/api/Chart.yaml":      "apiVersion: v2\nname: api\nversion: 0.1.0\n",
		"charts/db/templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t)
	for _, keep := range []bool{false, true} {
		opts := []Option{WithVersion(fmt.Sprintf("0.1.%d", map[bool]int{false: 1, true: 2}[keep]))}
		if keep {
			opts = append(opts, KeepChartYAML())
		}
		ref := addChart(t, s, dir, opts...)
		ch, err := loader.LoadArchive(bytes.NewReader(httpGet(t, ref.URL)))
		if err != nil {
			t.Fatalf("loading the archive: %v", err)
		}
		if ch.Metadata.Version != ref.Version || len(ch.Dependencies()) != 2 {
			t.Errorf("keep=%v: version %s (want %s), %d subcharts (want 2)", keep, ch.Metadata.Version, ref.Version, len(ch.Dependencies()))
		}
		raw := rawFile(ch.Raw, "Chart.yaml")
		if got := strings.Contains(raw, "depends-on"); got != keep {
			t.Errorf("keep=%v: root Chart.yaml has depends-on: %v\n%s", keep, got, raw)
		}
		if keep && !strings.Contains(raw, "version: "+ref.Version) {
			t.Errorf("root Chart.yaml lost the published version:\n%s", raw)
		}
		for _, sub := range ch.Dependencies() {
			if sub.Name() == "db" && strings.Contains(rawFile(sub.Raw, "Chart.yaml"), "x-note") != keep {
				t.Errorf("keep=%v: subchart db's Chart.yaml:\n%s", keep, rawFile(sub.Raw, "Chart.yaml"))
			}
		}
	}
}

func rawFile(files []*common.File, name string) string {
	for _, f := range files {
		if f.Name == name {
			return string(f.Data)
		}
	}
	return ""
}

// AddArchive serves a chart packaged elsewhere byte for byte, from the
// HTTP repository and the OCI registry, under its own name and version.
func TestAddArchiveServesTheBytesAsGiven(t *testing.T) {
	s := startServer(t)
	packaged := addChart(t, s, podinfoDir, WithName("elsewhere"), WithVersion("1.2.3"))
	archive := httpGet(t, packaged.URL)
	// The same archive under another name and version is another chart.
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	ch.Metadata.Name, ch.Metadata.Version = "given", "2.0.0"
	path, err := chartutil.Save(ch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	ref, err := s.AddArchive(data)
	if err != nil {
		t.Fatalf("AddArchive: %v", err)
	}
	if ref.Name != "given" || ref.Version != "2.0.0" || ref.Digest != "sha256:"+sha256Hex(data) {
		t.Errorf("ref %+v, want given 2.0.0 with the archive's digest", ref)
	}
	if got := httpGet(t, ref.URL); !bytes.Equal(got, data) {
		t.Error("the HTTP repository serves other bytes than given")
	}
	if !fetchIndex(t, s).Has("given", "2.0.0") {
		t.Error("index.yaml does not list given 2.0.0")
	}
	pulled, err := newRegistryClient(t).Pull(strings.TrimPrefix(ref.OCIReference, "oci://"))
	if err != nil {
		t.Fatalf("Pull: %v", err)
	}
	if !bytes.Equal(pulled.Chart.Data, data) {
		t.Error("the OCI registry serves other bytes than given")
	}
	if _, err := s.AddArchive(data); !errors.Is(err, ErrChartExists) {
		t.Errorf("AddArchive again: %v, want ErrChartExists", err)
	}
}
