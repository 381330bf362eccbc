package cluster

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
)

// Network settings shared by the API server, the controller manager and kwok.
// Nothing routes these ranges: pods are simulated and never send packets.
const (
	serviceCIDR = "10.96.0.0/16"
	// podCIDR is far larger than kwok's default /24, which runs out of pod
	// IPs in load tests.
	podCIDR = "10.244.0.0/16"
	// serviceAccountIssuer matches what most clusters use, so tokens look real.
	serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"
)

// Nodes created by the cluster carry this annotation and kwok manages only
// nodes that have it, so kwok never fights another node owner.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeValue      = "fake"
)

// Client rate limits of the controllers: the defaults (20/30 for the
// controller manager) throttle tests that create dozens of releases at once.
const (
	controllerQPS   = 200
	controllerBurst = 400
)

// layout names every file and directory of a cluster under its root.
type layout struct{ root string }

func (l layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.root}, elem...)...)
}

func (l layout) adminKubeconfig() string       { return l.path("kubeconfig") }
func (l layout) pki(name string) string        { return l.path("pki", name) }
func (l layout) config(name string) string     { return l.path("config", name) }
func (l layout) logs() string                  { return l.path("logs") }
func (l layout) etcdData() string              { return l.path("etcd") }
func (l layout) storage() string               { return l.path("source-controller", "storage") }
func (l layout) home() string                  { return l.path("home") }
func (l layout) tmp() string                   { return l.path("tmp") }
func (l layout) kwokWorkDir() string           { return l.path("kwok") }
func (l layout) apiserverCertDir() string      { return l.path("apiserver") }
func (l layout) kubeconfigFor(c string) string { return l.config(c + ".kubeconfig") }

// dirs lists the directories Start creates.
func (l layout) dirs() []string {
	return []string{
		l.path("pki"), l.path("config"), l.logs(), l.storage(), l.home(), l.tmp(),
		l.kwokWorkDir(), l.apiserverCertDir(),
	}
}

// endpoints are the ports one cluster listens on, all on 127.0.0.1.
type endpoints struct {
	etcdClient, etcdPeer, apiserver      int
	storage, sourceMetrics, sourceHealth int
}

// endpointCount must match the number of fields newEndpoints fills.
const endpointCount = 6

func newEndpoints(ports []int) (endpoints, error) {
	if len(ports) != endpointCount {
		return endpoints{}, fmt.Errorf("need %d ports, got %d", endpointCount, len(ports))
	}
	return endpoints{
		etcdClient: ports[0], etcdPeer: ports[1], apiserver: ports[2],
		storage: ports[3], sourceMetrics: ports[4], sourceHealth: ports[5],
	}, nil
}

func local(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func (e endpoints) etcdURL() string      { return "http://" + local(e.etcdClient) }
func (e endpoints) apiserverURL() string { return "https://" + local(e.apiserver) }
func (e endpoints) storageURL() string   { return "http://" + local(e.storage) }
func (e endpoints) sourceHealthURL() string {
	return "http://" + local(e.sourceHealth) + "/readyz"
}

func etcdArgs(name string, l layout, e endpoints) []string {
	peer := "http://" + local(e.etcdPeer)
	return []string{
		"--name=" + name,
		"--data-dir=" + l.etcdData(),
		"--listen-client-urls=" + e.etcdURL(),
		"--advertise-client-urls=" + e.etcdURL(),
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + name + "=" + peer,
		"--initial-cluster-state=new",
		// Kubernetes 1.36 controllers stall on "read version is not as new
		// as written version" unless etcd reports watch progress often.
		"--watch-progress-notify-interval=5s",
		// The data is thrown away with the cluster; fsync on a shared disk
		// is what makes etcd slow.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
}

func apiserverArgs(l layout, e endpoints) []string {
	return []string{
		"--etcd-servers=" + e.etcdURL(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(e.apiserver),
		"--cert-dir=" + l.apiserverCertDir(),
		"--tls-cert-file=" + l.pki("apiserver.crt"),
		"--tls-private-key-file=" + l.pki("apiserver.key"),
		"--client-ca-file=" + l.pki("ca.crt"),
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + l.pki("sa.pub"),
		"--service-account-signing-key-file=" + l.pki("sa.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		// No kubelets exist, so the Node authorizer has nothing to do.
		"--authorization-mode=RBAC",
		"--allow-privileged=true",
		// The default admission chain (namespace lifecycle, service
		// accounts, default tolerations, quotas, webhooks and admission
		// policies) is what charts meet on real clusters; it stays as is.
		// The endpoint reconciler would try to publish 127.0.0.1 as the
		// kubernetes Service endpoint, which validation rejects.
		"--endpoint-reconciler-type=none",
		"--max-requests-inflight=1000",
		"--max-mutating-requests-inflight=500",
		// /debug/pprof, for the benchmark's profile of the API server
		// (reached only by admin clients of 127.0.0.1).
		"--profiling=true",
		"--v=1",
	}
}

func controllerManagerArgs(l layout) []string {
	return []string{
		"--kubeconfig=" + l.kubeconfigFor(binControllerManager),
		// Health endpoints are not needed: readiness is observed through
		// what the controllers do (default ServiceAccount, untainted Node).
		"--secure-port=0",
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--controllers=*",
		// One identity (in system:masters) for all controllers keeps start
		// fast: no per-controller token has to be minted first.
		"--use-service-account-credentials=false",
		"--service-account-private-key-file=" + l.pki("sa.key"),
		"--root-ca-file=" + l.pki("ca.crt"),
		"--cluster-signing-cert-file=" + l.pki("ca.crt"),
		"--cluster-signing-key-file=" + l.pki("ca.key"),
		"--service-cluster-ip-range=" + serviceCIDR,
		"--kube-api-qps=" + strconv.Itoa(controllerQPS),
		"--kube-api-burst=" + strconv.Itoa(controllerBurst),
		"--v=1",
	}
}

func schedulerArgs(l layout) []string {
	return []string{
		"--config=" + l.config("kube-scheduler.yaml"),
		"--secure-port=0",
		"--bind-address=127.0.0.1",
		"--v=1",
	}
}

// schedulerConfig is the scheduler's configuration file; its client rate
// limits can only be raised here (the flags are ignored with --config).
func schedulerConfig(l layout) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, l.kubeconfigFor(binScheduler), controllerQPS, controllerBurst)
}

func kwokArgs(l layout) []string {
	return []string{
		"--kubeconfig=" + l.kubeconfigFor(binKwok),
		"--config=" + l.config("kwok-stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeValue,
		// Without renewed Leases the node-lifecycle controller declares the
		// nodes unreachable ~40 s after start and marks their pods unready.
		"--node-lease-duration-seconds=40",
		"--cidr=" + podCIDR,
	}
}

func sourceControllerArgs(l layout, e endpoints) []string {
	return []string{
		"--storage-path=" + l.storage(),
		"--storage-addr=" + local(e.storage),
		"--storage-adv-addr=" + local(e.storage),
		"--metrics-addr=" + local(e.sourceMetrics),
		"--health-addr=" + local(e.sourceHealth),
		"--enable-leader-election=false",
		"--events-addr=",
		"--watch-all-namespaces=true",
		"--log-encoding=console",
	}
}
