package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/afterhooks/helm-controller/test/envtestserver"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// upstreamFlags is every flag upstream helm-controller v1.6.x accepts, each
// with a valid value different from its default where one exists. Ports and
// paths are filled in by the test.
var upstreamFlags = []string{
	"--concurrent=2",
	"--default-kubeconfig-service-account=remote-sa",
	"--default-service-account=tenant-sa",
	"--enable-leader-election=true",
	"--events-addr=http://127.0.0.1:{{events}}",
	"--graceful-shutdown-timeout=20s",
	"--health-addr=127.0.0.1:{{health}}",
	"--http-retry=3",
	"--http-timeout=10s",
	"--insecure-kubeconfig-exec=true",
	"--insecure-kubeconfig-tls=true",
	"--interval-jitter-percentage=10",
	"--kube-api-burst=200",
	"--kube-api-qps=40",
	"--leader-election-lease-duration=20s",
	"--leader-election-release-on-cancel=true",
	"--leader-election-renew-deadline=15s",
	"--leader-election-retry-period=3s",
	"--log-encoding=console",
	"--log-level=debug",
	"--max-retry-delay=10m",
	"--metrics-addr=127.0.0.1:{{metrics}}",
	"--min-retry-delay=1s",
	"--no-cross-namespace-refs=true",
	"--oom-watch-current-memory-path=/sys/fs/cgroup/memory.current",
	"--oom-watch-interval=1s",
	"--oom-watch-max-memory-path=/sys/fs/cgroup/memory.max",
	"--oom-watch-memory-threshold=90",
	"--override-manager=kubectl-edit",
	"--override-manager=kubectl-patch",
	"--requeue-dependency=10s",
	"--snapshot-digest-algo=blake3",
	"--token-cache-max-duration=30m",
	"--token-cache-max-size=50",
	"--watch-all-namespaces=false",
	"--watch-configs-label-selector=team=platform",
	"--watch-label-selector=sharding.fluxcd.io/key=shard1",
	"--feature-gates=" + strings.Join([]string{
		"AdditiveCELDependencyCheck=true",
		"AdoptLegacyReleases=false",
		"AllowDNSLookups=true",
		"CacheSecretsAndConfigMaps=true",
		"CancelHealthCheckOnNewRevision=true",
		"CorrectDrift=false",
		"DefaultToRetryOnFailure=true",
		"DetectDrift=false",
		"DirectSourceFetch=true",
		"DisableChartDigestTracking=true",
		"DisableConfigWatchers=true",
		"ExternalArtifact=false",
		"OOMWatch=false",
		// On: --default-kubeconfig-service-account needs it, as upstream.
		"ObjectLevelWorkloadIdentity=true",
		"RecreateImmutableResources=true",
		"UseHelm3Defaults=true",
		"DefaultToAfterHooks=true",
	}, ","),
}

var (
	buildOnce   sync.Once
	builtBinary string
	buildErr    error
)

// controllerBinary builds the controller once per test run.
func controllerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "helm-controller-bin-*")
		if err != nil {
			buildErr = err
			return
		}
		builtBinary = filepath.Join(dir, "helm-controller")
		out, err := exec.Command("go", "build", "-o", builtBinary, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBinary
}

// startAPIServer runs etcd and kube-apiserver from the project's tool cache
// with our CRD and source-controller's installed, except those named in
// without (e.g. externalartifacts.source.toolkit.fluxcd.io), and returns an
// admin kubeconfig path.
func startAPIServer(t *testing.T, without ...string) string {
	t.Helper()
	kubeconfig, _ := startAPIServerWithConfig(t, without...)
	return kubeconfig
}

// startAPIServerWithConfig is startAPIServer that also returns the admin
// REST config, for the test's own client.
func startAPIServerWithConfig(t *testing.T, without ...string) (string, *rest.Config) {
	t.Helper()
	binDir, err := envtestserver.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	// The controller watches source-controller's kinds, so their CRDs
	// must be served too, as in any Flux installation.
	crds, err := envtestserver.CRDs([]string{filepath.Join("config", "crd", "bases"), envtestserver.SourceCRDDir(binDir)}, without...)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := envtestserver.Start(binDir, crds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })

	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("creating an admin user: %v", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		t.Fatalf("writing the admin kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, user.Config()
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// syncBuffer collects process output safely across goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestStartsWithEveryUpstreamFlag(t *testing.T) {
	binary := controllerBinary(t)
	kubeconfig := startAPIServer(t)

	ports := map[string]string{"health": freePort(t), "metrics": freePort(t), "events": freePort(t)}
	args := []string{"--kubeconfig=" + kubeconfig}
	for _, f := range upstreamFlags {
		for name, port := range ports {
			f = strings.ReplaceAll(f, "{{"+name+"}}", port)
		}
		args = append(args, f)
	}

	var output syncBuffer
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "RUNTIME_NAMESPACE=default")
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	health := "http://127.0.0.1:" + ports["health"]
	for _, path := range []string{"/healthz", "/readyz"} {
		waitHTTP200(t, health+path, exited, &output)
	}
	// --concurrent=2 must reach the controller's worker pool. The
	// controller registers its metrics once it has started (after leader
	// election and cache sync), so poll for them.
	wants := []string{"# TYPE controller_runtime_reconcile_total counter", `controller_runtime_max_concurrent_reconciles{controller="helmrelease"} 2`}
	metricsURL := "http://127.0.0.1:" + ports["metrics"] + "/metrics"
	var metrics string
	deadline := time.Now().Add(30 * time.Second)
	for {
		metrics = waitHTTP200(t, metricsURL, exited, &output)
		missing := 0
		for _, want := range wants {
			if !strings.Contains(metrics, want) {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, want := range wants {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q\n%s", want, output.String())
		}
	}

	// Leader election proves the client, kubeconfig and namespace flags work.
	waitFor(t, 30*time.Second, func() bool { return strings.Contains(output.String(), "Successfully acquired lease") },
		"leader election did not succeed", &output)

	log := output.String()
	if strings.Contains(log, "invalid") || strings.Contains(log, "unknown flag") {
		t.Errorf("controller reported a flag error:\n%s", log)
	}
	if strings.Contains(log, "not implemented") {
		t.Errorf("controller says a flag or gate is not implemented:\n%s", log)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("controller exited with %v after SIGTERM:\n%s", err, output.String())
		}
	case <-time.After(20 * time.Second): // --graceful-shutdown-timeout=20s
		t.Fatalf("controller still running 20s after SIGTERM:\n%s", output.String())
	}
	t.Logf("clean shutdown %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

func TestRejectsBadArguments(t *testing.T) {
	binary := controllerBinary(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--not-a-flag"}, "unknown flag: --not-a-flag"},
		{"unknown feature gate", []string{"--feature-gates=NoSuchGate=true"}, "feature-gate 'NoSuchGate' not supported"},
		{"bad digest algorithm", []string{"--snapshot-digest-algo=md5"}, "unsupported algorithm"},
		{"zero concurrency", []string{"--concurrent=0"}, "--concurrent must be at least 1"},
		{"bad label selector", []string{"--watch-label-selector=a b c"}, "invalid --watch-label-selector"},
		{"bad jitter", []string{"--interval-jitter-percentage=100"}, "invalid --interval-jitter-percentage"},
		{"OOM threshold 0", []string{"--oom-watch-memory-threshold=0"}, "--oom-watch-memory-threshold must be between 1 and 100"},
		{"kubeconfig ServiceAccount without its gate", []string{"--default-kubeconfig-service-account=remote-sa"},
			"cannot set default service accounts when the feature gate ObjectLevelWorkloadIdentity is not enabled"},
		{"OOM watch without a cgroup", []string{"--feature-gates=OOMWatch=true",
			"--oom-watch-max-memory-path=/nonexistent/memory.max", "--oom-watch-current-memory-path=/nonexistent/memory.current"},
			"setting up the OOM watch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// No kubeconfig: argument errors must be reported before any
			// connection to a cluster is attempted.
			cmd := exec.CommandContext(ctx, binary, tt.args...)
			cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("exit code 0, want failure; output:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Fatalf("output does not contain %q:\n%s", tt.want, out)
			}
		})
	}
}

// TestEveryFlagIsDocumented parses --help and checks docs/flags.md lists
// each flag, and no flag that --help lacks.
func TestEveryFlagIsDocumented(t *testing.T) {
	binary := controllerBinary(t)
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help failed: %v\n%s", err, out)
	}
	docs, err := os.ReadFile(filepath.Join("docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1)
	if len(flags) < 30 {
		t.Fatalf("found only %d flags in --help output:\n%s", len(flags), out)
	}
	for _, m := range flags {
		if !strings.Contains(string(docs), "`"+m[1]+"`") {
			t.Errorf("flag %s is not documented in docs/flags.md", m[1])
		}
	}
	// And the other way round: no row documents a flag the binary lacks.
	offered := map[string]bool{}
	for _, m := range flags {
		offered[m[1]] = true
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `(--[a-z0-9-]+)` \\|").FindAllStringSubmatch(string(docs), -1) {
		if !offered[m[1]] {
			t.Errorf("docs/flags.md documents %s, which --help does not offer", m[1])
		}
	}
	// Feature gates: internal/features' TestDocsListEveryGateWithItsDefault.
}

// TestDocsListNothingAsNotImplemented keeps docs/flags.md free of flags or
// gates that are accepted but do nothing.
func TestDocsListNothingAsNotImplemented(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("docs", "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(docs), "\n") {
		if strings.HasPrefix(line, "| `") && (strings.Contains(line, "not yet") || strings.Contains(line, "not implemented")) {
			t.Errorf("docs/flags.md: %s", line)
		}
	}
}

// TestFlagListMatchesUpstream keeps the table above honest: every flag the
// binary offers that upstream also has is exercised by the start-up test.
func TestFlagListMatchesUpstream(t *testing.T) {
	binary := controllerBinary(t)
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help failed: %v\n%s", err, out)
	}
	tested := map[string]bool{}
	for _, f := range upstreamFlags {
		tested[strings.SplitN(f, "=", 2)[0]] = true
	}
	// Flags we add beyond upstream's set; the start-up test passes it.
	ours := map[string]bool{"--kubeconfig": true}
	for _, m := range regexp.MustCompile(`(?m)^\s+(--[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		if !tested[m[1]] && !ours[m[1]] {
			t.Errorf("flag %s is offered but not exercised by TestStartsWithEveryUpstreamFlag", m[1])
		}
	}
	for flag := range tested {
		if !strings.Contains(string(out), flag+" ") {
			t.Errorf("upstream flag %s is missing from --help", flag)
		}
	}
}

// waitHTTP200 polls url until it answers 200 and returns the body.
func waitHTTP200(t *testing.T, url string, exited <-chan error, output *syncBuffer) string {
	t.Helper()
	var body string
	waitFor(t, 60*time.Second, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("controller exited early (%v):\n%s", err, output.String())
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	}, url+" never answered 200", output)
	return body
}

func waitFor(t *testing.T, timeout time.Duration, ok func() bool, msg string, output *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s within %s; controller output:\n%s", msg, timeout, output.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestDefaultHookOrder(t *testing.T) {
	if got := defaultHookOrder(true); got != v2.AfterHooks {
		t.Errorf("with DefaultToAfterHooks: %q, want afterHooks", got)
	}
	if got := defaultHookOrder(false); got != v2.BeforeHooks {
		t.Errorf("without DefaultToAfterHooks: %q, want beforeHooks", got)
	}
}
