package e2e

import (
	"archive/tar"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/hack/release/dist"
	"github.com/afterhooks/helm-controller/test/cluster"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// TestImage builds the release image from this checkout the way `make
// image` does, checks what a registry and a kubelet would see, and runs the
// binary from its layers with the release Deployment's args and env.
func TestImage(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := dist.GitBuild(root, "")
	if err != nil {
		t.Fatal(err)
	}
	build := func() v1.ImageIndex {
		b.WorkDir = t.TempDir()
		start := time.Now()
		idx, err := b.Image(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("image built in %s", time.Since(start).Round(time.Millisecond))
		return idx
	}
	idx := build()
	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s:%s@%s", dist.Repository, b.Version, digest)

	out := t.TempDir()
	written, err := dist.WriteImage(idx, out, b.Version)
	if err != nil {
		t.Fatal(err)
	}

	var binary string
	t.Run("layout", func(t *testing.T) {
		binary = checkLayout(t, written, b, filepath.Join(out, "extracted"))
	})
	t.Run("docker-load-tarballs", func(t *testing.T) {
		checkTarballs(t, idx, written, b.Version)
	})
	t.Run("sbom-and-provenance", func(t *testing.T) {
		checkAttestations(t, idx, written, b, filepath.Join(out, "extracted"))
	})
	t.Run("reproducible", func(t *testing.T) {
		again, err := build().Digest()
		if err != nil {
			t.Fatal(err)
		}
		if again != digest {
			t.Errorf("a second build of one commit gave %s, the first %s", again, digest)
		}
	})
	t.Run("release-deployment-runs-afterHooks", func(t *testing.T) {
		if binary == "" {
			t.Skip("no binary extracted")
		}
		runReleaseDeployment(t, root, binary, b.Version, digest.String())
	})
}

// checkLayout opens the OCI layout as a registry client would and returns
// the host platform's binary extracted from the image's layers.
func checkLayout(t *testing.T, w dist.Written, b dist.Build, dir string) string {
	p, err := layout.FromPath(w.Layout)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != b.Version {
		t.Fatalf("layout index %+v, want one index tagged %s", topManifest.Manifests, b.Version)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, dist.PlatformKey(*d.Platform))
	}
	if want := []string{"linux/amd64", "linux/arm64", "linux/arm/v7"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %v, want %v", platforms, want)
	}

	var hostBinary string
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		plat := dist.PlatformKey(*d.Platform)
		if cfg.Variant != d.Platform.Variant {
			t.Errorf("%s config has variant %q", plat, cfg.Variant)
		}
		if cfg.Config.User != "65534:65534" {
			t.Errorf("%s runs as %q, want 65534:65534", plat, cfg.Config.User)
		}
		if !slices.Equal(cfg.Config.Entrypoint, []string{dist.BinaryPath}) {
			t.Errorf("%s entrypoint %v, want [%s]", plat, cfg.Config.Entrypoint, dist.BinaryPath)
		}
		for label, want := range map[string]string{
			"org.opencontainers.image.source":   dist.SourceURL,
			"org.opencontainers.image.version":  b.Version,
			"org.opencontainers.image.revision": b.Revision,
		} {
			if got := cfg.Config.Labels[label]; got != want {
				t.Errorf("%s label %s = %q, want %q", plat, label, got, want)
			}
		}
		if !cfg.Created.Time.Equal(b.Created) {
			t.Errorf("%s created %s, want the commit time %s", plat, cfg.Created.Time, b.Created)
		}
		path := filepath.Join(dir, d.Platform.Architecture, "helm-controller")
		extractFile(t, img, strings.TrimPrefix(dist.BinaryPath, "/"), path)
		checkStaticELF(t, path, d.Platform.Architecture)
		if d.Platform.Variant != "" {
			checkGOARM(t, path, strings.TrimPrefix(d.Platform.Variant, "v"))
		}
		if d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH {
			hostBinary = path
		}
	}
	if hostBinary == "" {
		t.Fatalf("no image for the host platform %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return hostBinary
}

// checkAttestations attaches the SBOMs and the provenance to the layout
// as `make image` does, reads them back from it, and checks each SBOM's
// modules against `go version -m` of the binary extracted from that
// platform's image (by checkLayout), and the provenance's subjects and
// modules against the index and the binaries.
func checkAttestations(t *testing.T, idx v1.ImageIndex, w dist.Written, b dist.Build, extracted string) {
	arts, err := dist.Attestations(b, idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := dist.AttachToLayout(w.Layout, b.Created, arts); err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	allModules := map[string]bool{}
	for _, d := range m.Manifests {
		plat := dist.PlatformKey(*d.Platform)
		found, err := dist.LayoutReferrers(w.Layout, d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].ArtifactType != dist.SBOMMediaType {
			t.Fatalf("%s: %d referrers in the layout, want one SBOM", plat, len(found))
		}
		got, err := dist.SBOMModules(found[0].Data)
		if err != nil {
			t.Fatal(err)
		}
		want := goVersionM(t, filepath.Join(extracted, d.Platform.Architecture, "helm-controller"))
		if len(want) < 50 || !slices.Equal(got, want) {
			t.Errorf("%s: the SBOM lists %d modules, go version -m %d; they differ:\n got %v\nwant %v", plat, len(got), len(want), got, want)
		}
		for _, mod := range want {
			allModules[mod.Path+"@"+mod.Version] = true
		}
	}

	digest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	found, err := dist.LayoutReferrers(w.Layout, digest)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ArtifactType != dist.ProvenanceMediaType {
		t.Fatalf("the index has %d referrers in the layout, want one provenance statement", len(found))
	}
	var st dist.Statement
	if err := json.Unmarshal(found[0].Data, &st); err != nil {
		t.Fatal(err)
	}
	if st.PredicateType != dist.SLSAProvenanceType || st.Subject[0].Digest["sha256"] != digest.Hex {
		t.Errorf("provenance %s about %v, want SLSA about the index %s", st.PredicateType, st.Subject[0].Digest, digest)
	}
	var commit string
	provModules := map[string]bool{}
	for _, d := range st.Predicate.BuildDefinition.ResolvedDependencies {
		if c := d.Digest["gitCommit"]; c != "" {
			commit = c
		}
		if v, ok := strings.CutPrefix(d.URI, "pkg:golang/"); ok && d.Name != "go" {
			provModules[v] = true
		}
	}
	if commit != b.Revision {
		t.Errorf("the provenance names commit %q, the build %q", commit, b.Revision)
	}
	if !maps.Equal(provModules, allModules) {
		t.Errorf("the provenance lists %d modules, the binaries %d", len(provModules), len(allModules))
	}
}

// goVersionM lists the modules `go version -m` prints for a binary (the
// replacement where a dep line is followed by =>), sorted by path.
func goVersionM(t *testing.T, path string) []dist.Module {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", path).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", path, err)
	}
	var mods []dist.Module
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimPrefix(line, "\t"), "\t")
		switch {
		case len(f) >= 3 && f[0] == "dep":
			mods = append(mods, dist.Module{Path: f[1], Version: f[2]})
		case len(f) >= 3 && f[0] == "=>":
			mods[len(mods)-1] = dist.Module{Path: f[1], Version: f[2]}
		}
	}
	slices.SortFunc(mods, func(a, b dist.Module) int { return strings.Compare(a.Path, b.Path) })
	return mods
}

// extractFile writes one file of the image's flattened filesystem to dst.
func extractFile(t *testing.T, img v1.Image, name, dst string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s is not in the image", name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Name != name {
			continue
		}
		if hdr.Mode&0o111 == 0 || hdr.Uid != 0 {
			t.Errorf("%s has mode %o uid %d, want executable and root-owned", name, hdr.Mode, hdr.Uid)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
}

func checkStaticELF(t *testing.T, path, arch string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM}[arch]
	if f.Machine != wantMachine {
		t.Errorf("%s binary is for %s, want %s", arch, f.Machine, wantMachine)
	}
	wantClass := map[string]elf.Class{"amd64": elf.ELFCLASS64, "arm64": elf.ELFCLASS64, "arm": elf.ELFCLASS32}[arch]
	if f.Class != wantClass {
		t.Errorf("%s binary is %s, want %s", arch, f.Class, wantClass)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s binary needs a dynamic loader; want a static binary (CGO off)", arch)
		}
	}
}

// checkGOARM checks the ARM level the binary was compiled for, from the
// build settings the Go linker records.
func checkGOARM(t *testing.T, path, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dist.ReadBinaryInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Settings["GOARM"]; got != want {
		t.Errorf("%s was built with GOARM=%q, want %q", path, got, want)
	}
	if got := info.Settings["CGO_ENABLED"]; got != "0" {
		t.Errorf("%s was built with CGO_ENABLED=%q, want 0", path, got)
	}
}

// checkTarballs loads the docker-save tarballs as `docker load` would.
func checkTarballs(t *testing.T, idx v1.ImageIndex, w dist.Written, version string) {
	tag, err := dist.Tag(version)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dist.Platforms {
		key := dist.PlatformKey(p)
		loaded, err := tarball.ImageFromPath(w.Tarballs[key], &tag)
		if err != nil {
			t.Fatalf("loading the %s tarball as %s: %v", key, tag, err)
		}
		want, err := dist.PlatformImage(idx, p)
		if err != nil {
			t.Fatal(err)
		}
		gotCfg, err := loaded.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		wantCfg, err := want.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		if gotCfg != wantCfg {
			t.Errorf("the %s tarball holds config %s, the index %s", key, gotCfg, wantCfg)
		}
	}
}

// runReleaseDeployment starts the binary on a cluster of its own with
// exactly the container args and env of the release Deployment, and
// installs the chart that deadlocks under Helm's wait order with afterHooks.
func runReleaseDeployment(t *testing.T, root, binary, version, digest string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	assets, err := dist.Manifests(root, version, digest)
	if err != nil {
		t.Fatal(err)
	}
	var deploy appsv1.Deployment
	if err := yaml.Unmarshal(assets[dist.DeploymentAsset], &deploy); err != nil {
		t.Fatal(err)
	}
	container := deploy.Spec.Template.Spec.Containers[0]
	if want := dist.Repository + ":" + version + "@" + digest; container.Image != want {
		t.Errorf("release Deployment runs %q, want %q", container.Image, want)
	}
	if container.SecurityContext == nil || container.SecurityContext.ReadOnlyRootFilesystem == nil || !*container.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("release Deployment does not keep the root filesystem read-only")
	}
	for _, port := range []string{"127.0.0.1:8080", "127.0.0.1:9440"} {
		if l, err := net.Listen("tcp", port); err != nil {
			t.Fatalf("the release args bind the default ports and %s is busy: %v", port, err)
		} else {
			l.Close()
		}
	}
	// Flux installs the Deployment into flux-system.
	const namespace = "flux-system"
	procEnv, err := kubeletEnv(container, namespace)
	if err != nil {
		t.Fatal(err)
	}

	c, cl := env.StartCluster(t, cluster.Options{
		Name:         "image",
		ExtraCRDDirs: []string{filepath.Join(root, "config", "crd", "bases")},
	})
	for _, ns := range []string{namespace, "apps"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	logPath := filepath.Join(t.TempDir(), "controller.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append(slices.Clone(container.Command), container.Args...)...)
	// In a pod the ServiceAccount token provides the cluster; here the
	// kubeconfig does, and it is the only addition to the release env.
	cmd.Env = append(procEnv, "KUBECONFIG="+c.Kubeconfig(), "PATH="+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("controller log:\n%s", tail(string(data), 60))
		}
	}()
	t.Logf("running %s %v with env %v", binary, container.Args, procEnv)

	ref := env.PublishChart(t, framework.DeadlockChart, "0.1.0", "image")
	repo := &sourcev1.HelmRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "local", Namespace: "apps"},
		Spec:       sourcev1.HelmRepositorySpec{URL: env.Charts.HelmRepositoryURL(), Interval: metav1.Duration{Duration: time.Minute}},
	}
	if err := cl.Create(ctx, repo); err != nil {
		t.Fatal(err)
	}
	hr := framework.Release("apps", "app", repo.Name, ref.Name, ref.Version, "")
	hr.Spec.Install = &v2.Install{
		Install:      helmv2.Install{Timeout: &metav1.Duration{Duration: 90 * time.Second}},
		WaitStrategy: v2.AfterHooks,
	}
	if err := cl.Create(ctx, hr); err != nil {
		t.Fatal(err)
	}
	env.Eventually(t, 3*time.Minute, "the HelmRelease Ready", func(ctx context.Context) error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(hr), hr); err != nil {
			return err
		}
		return framework.ReleaseReady(hr, framework.ReleaseWant{Reason: helmv2.InstallSucceededReason})
	})
	if err := framework.LogContains(logPath, version); err != nil {
		t.Errorf("the start-up log does not name the stamped version: %v", err)
	}
}

// kubeletEnv resolves the container's env as a kubelet would for a pod in
// namespace: literal values, the pod's namespace, and resource limits
// (CPU rounded up to whole cores, memory in bytes).
func kubeletEnv(c corev1.Container, namespace string) ([]string, error) {
	var out []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			out = append(out, e.Name+"="+namespace)
		case e.ValueFrom.ResourceFieldRef != nil:
			q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(e.ValueFrom.ResourceFieldRef.Resource, "limits."))]
			if !ok {
				return nil, fmt.Errorf("env %s refers to %s, which has no limit", e.Name, e.ValueFrom.ResourceFieldRef.Resource)
			}
			if e.ValueFrom.ResourceFieldRef.Resource == "limits.cpu" {
				out = append(out, fmt.Sprintf("%s=%d", e.Name, int64(math.Ceil(float64(q.MilliValue())/1000))))
			} else {
				out = append(out, fmt.Sprintf("%s=%d", e.Name, q.Value()))
			}
		default:
			return nil, fmt.Errorf("env %s: a source the test cannot resolve like a kubelet", e.Name)
		}
	}
	return out, nil
}

// tail returns the last lines of s.
func tail(s string, lines int) string {
	all := strings.Split(s, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
