package realcharts

import (
	"strings"
	"time"
)

// Simulation is how a chart is installed on the simulated cluster: only
// through values (never by editing its templates), and with the workload
// simulator's annotations (test/e2e/README.md) where a real program would
// create something the chart's pods need.
type Simulation struct {
	// Values are the HelmRelease's values.
	Values map[string]any
	// Simulated says, one line each, what the values tell the simulator.
	Simulated []string
	// Off lists the parts turned off because they need a real program
	// (or would disturb the shared test cluster), each with its reason.
	Off []string
	// Fixes lists packaging fixes, each with its reason; none is applied
	// to a chart that packages as it is.
	Fixes []string
	// Claims are the PersistentVolumeClaims (in the release's namespace)
	// that the chart's StatefulSets ask for: the test cluster has no
	// storage provisioner, so the test makes a volume bound to each.
	Claims []string
	// Deadlock: the chart's pods need what its post-install hook creates,
	// so the default wait (before the hooks) cannot pass, and afterHooks
	// can.
	Deadlock bool
	// Timeout, when set, is the HelmRelease's spec.timeout: short for a
	// chart whose default install is known to time out.
	Timeout time.Duration
	// ChangePath is where in the chart's values a map of harmless
	// annotations or labels lives (podAnnotations when empty): the values
	// changes of the full parity steps put a key there.
	ChangePath []string
}

// ChangeKey is the key the full parity steps' values changes set under
// ChangePath.
const ChangeKey = "parity.afterhooks.io/step"

// ChangedValues are the chart's values with ChangeKey set to value under
// ChangePath: a change of values the chart renders, and that changes
// nothing the simulated cluster cares about.
func (s Simulation) ChangedValues(value string) map[string]any {
	out := copyValues(s.Values)
	path := s.ChangePath
	if len(path) == 0 {
		path = []string{"podAnnotations"}
	}
	at := out
	for _, key := range path {
		next, ok := at[key].(map[string]any)
		if !ok {
			next = map[string]any{}
			at[key] = next
		}
		at = next
	}
	at[ChangeKey] = value
	return out
}

// secret is a Secret that a simulated program writes: its name and keys.
type secret struct {
	name string
	keys []string
}

// creates is the simulator annotation that makes a pod create the
// Secrets right before it completes or becomes ready.
func creates(secrets ...secret) map[string]any {
	var manifests []string
	for _, s := range secrets {
		m := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: " + s.name + "\n"
		if len(s.keys) > 0 {
			m += "stringData:\n"
			for _, k := range s.keys {
				m += "  " + k + ": simulated\n"
			}
		}
		manifests = append(manifests, m)
	}
	return map[string]any{"sim.afterhooks.io/creates": strings.Join(manifests, "---\n")}
}

// simulations is keyed by the chart's name in corpus.txt. Values assume
// the release is named after the chart (the HelmRelease's name).
var simulations = map[string]Simulation{
	"cert-manager": {
		Values: map[string]any{"crds": map[string]any{"enabled": true},
			"startupapicheck": map[string]any{"ttlSecondsAfterFinished": 5}},
		ChangePath: []string{"podLabels"},
		Simulated: []string{"crds.enabled: true, so that the chart's templated CRDs (kept on uninstall) are part of the release",
			"startupapicheck.ttlSecondsAfterFinished: 5: a post-install hook Job that deletes itself"},
	},
	"cockroachdb": {
		Values: map[string]any{
			"tls": map[string]any{"selfSigner": map[string]any{"annotations": creates(
				secret{"cockroachdb-node-secret", []string{"ca.crt", "tls.crt", "tls.key"}},
				secret{"cockroachdb-client-secret", []string{"ca.crt", "tls.crt", "tls.key"}})}},
			"init":        map[string]any{"annotations": creates(secret{name: "cockroachdb-initialized"})},
			"statefulset": map[string]any{"secretMounts": []any{"cockroachdb-initialized"}},
		},
		Simulated: []string{
			"the pre-install certificate Job (its real program writes the node and client certificate Secrets) creates both Secrets",
			"the post-install init Job (`cockroach init`) creates the Secret cockroachdb-initialized, which the StatefulSet's pods mount " +
				"(statefulset.secretMounts): a node turns ready only once the cluster is initialised, the deadlock of issue 1",
		},
		Claims:     []string{"datadir-cockroachdb-0", "datadir-cockroachdb-1", "datadir-cockroachdb-2"},
		Deadlock:   true,
		Timeout:    20 * time.Second,
		ChangePath: []string{"labels"},
	},
	"external-secrets": {
		Fixes: []string{"none needed: the optional remote dependency bitwarden-sdk-server is off by default (its condition), " +
			"and the module holds no CRDs (its release tool adds them to templates/crds), so the chart installs without them"},
	},
	"flagger":    {},
	"loadtester": {},
	"podinfo-flagger": {
		Values: map[string]any{"hpa": map[string]any{"enabled": false}},
		Off: []string{"hpa.enabled: false: the chart's HorizontalPodAutoscaler is autoscaling/v2 with fields of v2beta2 " +
			"(targetAverageUtilization), which the API server refuses: as published, the install fails under both controllers"},
	},
	"vault": {
		Values: map[string]any{"injector": map[string]any{"enabled": false}},
		Off: []string{"injector.enabled: false: the agent injector's MutatingWebhookConfiguration matches every pod of the " +
			"shared test cluster and needs a real program to answer"},
		Claims:     []string{"data-vault-0"},
		ChangePath: []string{"server", "annotations"},
	},
	"gatekeeper": {
		Values: map[string]any{"disableValidatingWebhook": true, "disableMutation": true,
			"postUpgrade":  map[string]any{"labelNamespace": map[string]any{"enabled": true}},
			"preUninstall": map[string]any{"deleteWebhookConfigurations": map[string]any{"enabled": true}}},
		Simulated: []string{"postUpgrade.labelNamespace and preUninstall.deleteWebhookConfigurations enabled: the chart's " +
			"post-upgrade and pre-delete hook Jobs"},
		Off: []string{"disableValidatingWebhook and disableMutation: true: the webhooks match every object (and, failing closed, " +
			"every namespace) of the shared test cluster and need a real program to answer"},
	},
	"ingress-nginx": {
		Values: map[string]any{"controller": map[string]any{
			"service": map[string]any{"type": "ClusterIP"},
			"admissionWebhooks": map[string]any{
				"failurePolicy": "Ignore",
				"patch":         map[string]any{"podAnnotations": creates(secret{"ingress-nginx-admission", []string{"ca", "cert", "key"}})},
			},
		}},
		Simulated: []string{"the pre-install certgen Job (its real program writes the webhook's certificate Secret, which the " +
			"controller's pods mount) creates the Secret ingress-nginx-admission",
			"controller.service.type: ClusterIP: a LoadBalancer Service is never ready without a cloud's load balancer"},
		Off:        []string{"controller.admissionWebhooks.failurePolicy: Ignore: no program answers the webhook on the test cluster"},
		ChangePath: []string{"controller", "podLabels"},
	},
	"descheduler": {
		Values:    map[string]any{"ttlSecondsAfterFinished": 30},
		Simulated: []string{"ttlSecondsAfterFinished: 30 for the Jobs of its CronJob"},
	},
	"external-dns": {
		Values:    map[string]any{"policy": "upsert-only"},
		Simulated: []string{"policy: upsert-only, which the chart's values schema requires to be set"},
	},
	"metrics-server": {
		Values: map[string]any{"apiService": map[string]any{"create": false}},
		Off: []string{"apiService.create: false: the APIService v1beta1.metrics.k8s.io would send every discovery of the shared " +
			"test cluster to a program that cannot answer"},
	},
	"karpenter": {
		Values: map[string]any{"settings": map[string]any{"clusterName": "corpus"},
			"replicas": 1, "topologySpreadConstraints": []any{}},
		Simulated: []string{"settings.clusterName: corpus, which the chart requires",
			"replicas: 1 and no topologySpreadConstraints: its pods refuse to share a node and spread over zones, " +
				"and the test cluster has one node without a zone"},
	},
}
