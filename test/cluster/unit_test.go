package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// These tests need no cluster binaries.

func TestParseEphemeralLow(t *testing.T) {
	tests := []struct {
		in     string
		want   int
		wantOK bool
	}{
		{in: "32768\t60999\n", want: 32768, wantOK: true},
		{in: "1024 65000", want: 1024, wantOK: true},
		{in: "", wantOK: false},
		{in: "32768", wantOK: false},
		{in: "abc 60999", wantOK: false},
		{in: "0 60999", wantOK: false},
		{in: "70000 80000", wantOK: false},
	}
	for _, tt := range tests {
		got, ok := parseEphemeralLow(tt.in)
		if ok != tt.wantOK || (ok && got != tt.want) {
			t.Errorf("parseEphemeralLow(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestReservePorts(t *testing.T) {
	set, err := reservePorts(endpointCount)
	if err != nil {
		t.Fatalf("reservePorts: %v", err)
	}
	low, high := portBand()
	seen := map[int]bool{}
	for _, p := range set.ports {
		if p < low || p >= high {
			t.Errorf("port %d outside band %d-%d", p, low, high-1)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
		if !portFree(p) {
			t.Errorf("reserved port %d is not bindable", p)
		}
	}

	// While reserved, nobody else (here: a second claim in this very
	// process, which flock treats like another process) can claim the port.
	port := set.ports[0]
	lock, err := claimPort(portLockDir(), port)
	if err != nil {
		t.Fatalf("claimPort: %v", err)
	}
	if lock != nil {
		lock.Close()
		t.Fatalf("port %d claimed twice", port)
	}

	set.release()
	lock, err = claimPort(portLockDir(), port)
	if err != nil || lock == nil {
		t.Fatalf("claiming port %d after release: lock %v, err %v", port, lock, err)
	}
	lock.Close()
}

func TestReserveAddressHoldsItsPortUntilReleased(t *testing.T) {
	addr, release, err := ReserveAddress()
	if err != nil {
		t.Fatalf("ReserveAddress: %v", err)
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("ReserveAddress returned %q (%v); want a 127.0.0.1 address", addr, err)
	}
	port, _ := strconv.Atoi(portText)
	if low, high := portBand(); port < low || port >= high {
		t.Errorf("port %d outside band %d-%d, where outgoing connections could take it", port, low, high-1)
	}
	if lock, _ := claimPort(portLockDir(), port); lock != nil {
		lock.Close()
		t.Fatalf("port %d claimed by another test process while reserved", port)
	}
	release()
	lock, err := claimPort(portLockDir(), port)
	if err != nil || lock == nil {
		t.Fatalf("claiming port %d after release: lock %v, err %v", port, lock, err)
	}
	lock.Close()
}

func TestClaimPortSkipsPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	lock, err := claimPort(t.TempDir(), port)
	if err != nil {
		t.Fatalf("claimPort: %v", err)
	}
	if lock != nil {
		lock.Close()
		t.Errorf("claimed port %d although something listens on it", port)
	}
}

func TestAuthorityIssue(t *testing.T) {
	ca, err := newAuthority("unit")
	if err != nil {
		t.Fatalf("newAuthority: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	server, err := ca.issue(certSpec{commonName: "kube-apiserver", dnsNames: []string{"localhost"},
		ips: []net.IP{net.IPv4(127, 0, 0, 1)}, server: true})
	if err != nil {
		t.Fatalf("issuing server cert: %v", err)
	}
	cert := parseCert(t, server.certPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "localhost",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("server cert does not verify for localhost: %v", err)
	}
	if err := cert.VerifyHostname("127.0.0.1"); err != nil {
		t.Errorf("server cert lacks 127.0.0.1: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Errorf("server-only cert verifies as a client cert")
	}

	client, err := ca.issue(certSpec{commonName: "kubernetes-admin", organizations: []string{mastersGroup}, client: true})
	if err != nil {
		t.Fatalf("issuing client cert: %v", err)
	}
	cert = parseCert(t, client.certPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client cert does not verify: %v", err)
	}
	if cert.Subject.CommonName != "kubernetes-admin" || !slices.Equal(cert.Subject.Organization, []string{mastersGroup}) {
		t.Errorf("client subject = %v", cert.Subject)
	}
	if time.Until(cert.NotAfter) < 300*24*time.Hour {
		t.Errorf("client cert expires too soon: %s", cert.NotAfter)
	}

	other, err := newAuthority("other")
	if err != nil {
		t.Fatal(err)
	}
	foreign := x509.NewCertPool()
	foreign.AddCert(other.cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: foreign,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Errorf("cert verifies against another cluster's CA")
	}

	if _, err := ca.issue(certSpec{commonName: "useless"}); err == nil {
		t.Errorf("issuing a cert that is neither client nor server succeeded")
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

const crdDoc = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
`

func TestParseCRDs(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantNames []string
		wantErr   string
	}{
		{name: "one CRD", in: crdDoc, wantNames: []string{"widgets.example.com"}},
		{
			name: "several documents, empty and comment-only ones skipped",
			in: "# licence header\n---\n" + crdDoc + "---\n---\n" +
				strings.Replace(crdDoc, "widgets", "gadgets", 1),
			wantNames: []string{"widgets.example.com", "gadgets.example.com"},
		},
		{name: "empty file"},
		{
			name:    "other kinds are refused",
			in:      crdDoc + "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
			wantErr: "document 2: only apiextensions.k8s.io/v1 CustomResourceDefinitions can be installed, found Namespace",
		},
		{
			name:    "old CRD API version is refused",
			in:      strings.Replace(crdDoc, "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1),
			wantErr: "only apiextensions.k8s.io/v1",
		},
		{
			name:    "nameless CRD",
			in:      strings.Replace(crdDoc, "  name: widgets.example.com\n", "", 1),
			wantErr: "has no name",
		},
		{name: "broken YAML", in: "kind: [unclosed\n", wantErr: "document 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crds, err := parseCRDs(strings.NewReader(tt.in), "test.yaml")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseCRDs: %v", err)
			}
			var names []string
			for _, c := range crds {
				names = append(names, c.name)
				if !strings.HasPrefix(string(c.json), "{") || c.source != "test.yaml" {
					t.Errorf("CRD %s: json %q, source %q", c.name, c.json, c.source)
				}
			}
			if !slices.Equal(names, tt.wantNames) {
				t.Errorf("names = %v, want %v", names, tt.wantNames)
			}
		})
	}
}

func TestReadCRDDirs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", crdDoc)
	write("a.yml", strings.Replace(crdDoc, "widgets", "gadgets", 1))
	write("kustomization.yaml", "resources: [b.yaml]\n")
	write("README.md", "not yaml")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	crds, err := readCRDDirs([]string{dir})
	if err != nil {
		t.Fatalf("readCRDDirs: %v", err)
	}
	var names []string
	for _, c := range crds {
		names = append(names, c.name)
	}
	if want := []string{"gadgets.example.com", "widgets.example.com"}; !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v (sorted by file, kustomization and non-YAML skipped)", names, want)
	}
	if _, err := readCRDDirs([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Errorf("missing directory accepted")
	}
}

func TestLastLines(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{in: "", n: 3, want: "(log is empty)"},
		{in: "\n\n", n: 3, want: "(log is empty)"},
		{in: "a\nb\n", n: 3, want: "a\nb"},
		{in: "a\nb\nc\nd", n: 2, want: "c\nd"},
		{in: "a\nb\nc\nd\n", n: 2, want: "c\nd"},
	}
	for _, tt := range tests {
		if got := lastLines([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestLogTailReadsOnlyTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.log")
	var b strings.Builder
	for range 10000 {
		b.WriteString("filler line that is long enough to push the start out of the tail window\n")
	}
	b.WriteString("the last line\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := logTail(path, 2)
	if !strings.HasSuffix(got, "the last line") || strings.Count(got, "\n") != 1 {
		t.Errorf("logTail = %q", got)
	}
	if got := logTail(filepath.Join(t.TempDir(), "none.log"), 2); !strings.Contains(got, "cannot read log") {
		t.Errorf("logTail of a missing file = %q", got)
	}
}

func TestOptionsWithDefaults(t *testing.T) {
	tests := []struct {
		name    string
		in      Options
		wantErr string
		check   func(Options) bool
	}{
		{name: "zero value", check: func(o Options) bool {
			return o.Name == DefaultName && o.Nodes == 1 && o.Timeout == DefaultTimeout
		}},
		{name: "explicit values kept", in: Options{Name: "e2e-1", Nodes: 2, Timeout: time.Minute},
			check: func(o Options) bool { return o.Name == "e2e-1" && o.Nodes == 2 && o.Timeout == time.Minute }},
		{name: "name must be a DNS label", in: Options{Name: "Not_Valid"}, wantErr: "invalid cluster name"},
		{name: "too many nodes", in: Options{Nodes: maxNodes + 1}, wantErr: "nodes must be between"},
		{name: "negative nodes", in: Options{Nodes: -1}, wantErr: "nodes must be between"},
		{name: "negative timeout", in: Options{Timeout: -time.Second}, wantErr: "timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.withDefaults()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("withDefaults: %v", err)
			}
			if !tt.check(got) {
				t.Errorf("withDefaults() = %+v", got)
			}
		})
	}
}

func TestFindBinaries(t *testing.T) {
	empty := t.TempDir()
	_, err := findBinaries(empty)
	if err == nil {
		t.Fatal("empty bin dir accepted")
	}
	for _, want := range []string{"make tools", binAPIServer, sourceCRDDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	full := t.TempDir()
	for _, name := range requiredBinaries {
		if err := os.WriteFile(filepath.Join(full, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(full, sourceCRDDir), 0o755); err != nil {
		t.Fatal(err)
	}
	bins, err := findBinaries(full)
	if err != nil {
		t.Fatalf("complete bin dir refused: %v", err)
	}
	if bins.path(binEtcd) != filepath.Join(full, binEtcd) {
		t.Errorf("etcd path = %s", bins.path(binEtcd))
	}

	// The environment variable is used only without an explicit directory.
	t.Setenv(BinDirEnv, full)
	if _, err := findBinaries(""); err != nil {
		t.Errorf("bin dir from %s refused: %v", BinDirEnv, err)
	}
	if _, err := findBinaries(empty); err == nil {
		t.Errorf("explicit empty dir accepted although %s points at a full one", BinDirEnv)
	}

	// A file without the execute bit does not count.
	if err := os.Chmod(filepath.Join(full, binKwok), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := findBinaries(full); err == nil || !strings.Contains(err.Error(), binKwok) {
		t.Errorf("non-executable kwok: err = %v", err)
	}
}

func TestPrepareDir(t *testing.T) {
	tmp, owns, err := prepareDir("", "unit")
	if err != nil {
		t.Fatalf("temporary dir: %v", err)
	}
	defer os.RemoveAll(tmp)
	if !owns || !strings.Contains(filepath.Base(tmp), "unit") {
		t.Errorf("temporary dir %s, owned %v", tmp, owns)
	}

	given := filepath.Join(t.TempDir(), "new", "cluster")
	got, owns, err := prepareDir(given, "unit")
	if err != nil || owns || got != given {
		t.Fatalf("given dir: got %s, owned %v, err %v", got, owns, err)
	}
	if err := os.Mkdir(layout{root: given}.etcdData(), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := prepareDir(given, "unit"); err == nil || !strings.Contains(err.Error(), "already holds a cluster") {
		t.Errorf("dir with etcd data: err = %v", err)
	}
}

func TestNodeUsable(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	tests := []struct {
		name string
		node corev1.Node
		want bool
	}{
		{name: "ready and untainted", node: corev1.Node{Status: corev1.NodeStatus{Conditions: ready}}, want: true},
		{name: "no conditions yet"},
		{name: "not ready", node: corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}},
		{name: "ready but still tainted", node: corev1.Node{
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: ready},
		}},
	}
	for _, tt := range tests {
		got, why := nodeUsable(&tt.node)
		if got != tt.want || (!got && why == nil) {
			t.Errorf("%s: nodeUsable = %v, %v; want %v with a reason when false", tt.name, got, why, tt.want)
		}
	}
}

// A process counts as stopped only once its exit has been handled: the
// cluster decides in onExit whether an exit was planned (a restart), and
// the planner clears that mark as soon as stop returns.
func TestStopReturnsAfterOnExit(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	handled := make(chan struct{})
	p, err := startProcess("sleep", sleep, t.TempDir(), []string{"60"}, os.Environ(), func(*process) {
		time.Sleep(200 * time.Millisecond)
		close(handled)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.stop(0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-handled:
	default:
		t.Fatal("stop returned before the exit was handled")
	}
}
