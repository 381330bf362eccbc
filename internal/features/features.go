// Package features lists the feature gates the controller accepts and their
// defaults: every gate of upstream helm-controller v1.6.x, so existing
// `--feature-gates` arguments keep working, plus DefaultToAfterHooks.
package features

import (
	"fmt"

	"github.com/fluxcd/pkg/runtime/controller"
	feathelper "github.com/fluxcd/pkg/runtime/features"
	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
)

const (
	// DefaultToAfterHooks makes afterHooks the wait strategy of install,
	// upgrade and rollback for HelmReleases that leave waitStrategy unset,
	// so a platform team can switch a whole fleet without editing manifests.
	DefaultToAfterHooks = "DefaultToAfterHooks"

	// DetectDrift and CorrectDrift are upstream's deprecated controller-wide
	// drift switches; spec.driftDetection replaces them.
	DetectDrift  = "DetectDrift"
	CorrectDrift = "CorrectDrift"

	// AllowDNSLookups lets chart templates resolve DNS names (Helm's getHostByName).
	AllowDNSLookups = "AllowDNSLookups"

	// OOMWatch stops the controller gracefully before the kernel kills it for
	// exceeding its memory limit, so no release is left pending.
	OOMWatch = "OOMWatch"

	// AdoptLegacyReleases is accepted for compatibility and ignored, as upstream does.
	AdoptLegacyReleases = "AdoptLegacyReleases"

	// DisableChartDigestTracking stops appending the OCI digest to the chart
	// version, so a digest change alone does not upgrade the release.
	DisableChartDigestTracking = "DisableChartDigestTracking"

	// UseHelm3Defaults restores Helm 3 behaviour where the spec leaves a
	// choice open: client-side apply and the legacy readiness checks.
	UseHelm3Defaults = "UseHelm3Defaults"

	// CancelHealthCheckOnNewRevision abandons a running readiness wait when a
	// new reconcile request arrives for the same HelmRelease.
	CancelHealthCheckOnNewRevision = "CancelHealthCheckOnNewRevision"

	// DefaultToRetryOnFailure makes RetryOnFailure the default install and
	// upgrade strategy.
	DefaultToRetryOnFailure = "DefaultToRetryOnFailure"

	// RecreateImmutableResources lets upgrades, rollbacks and drift
	// corrections recreate, without the helm.toolkit.fluxcd.io/force:
	// enabled annotation, an object of a listed built-in kind that the API
	// server refuses to update in place for one of that kind's fixed
	// fields: a Job's spec; a Service's cluster IPs and IP families; the
	// selector of a Deployment, ReplicaSet or DaemonSet; a RoleBinding's
	// or ClusterRoleBinding's roleRef; an immutable ConfigMap's or
	// Secret's content (and a Secret's type). Every other kind, custom
	// resources and StatefulSets included, still needs the annotation, and
	// objects annotated helm.toolkit.fluxcd.io/force: disabled opt out.
	// internal/recreate (gateKinds) holds the list; see docs/immutable.md.
	RecreateImmutableResources = "RecreateImmutableResources"

	// ObjectLevelWorkloadIdentity allows per-object workload identity for
	// cloud provider authentication.
	ObjectLevelWorkloadIdentity = "ObjectLevelWorkloadIdentity"
)

// defaults maps every supported gate to its default state.
func defaults() map[string]bool {
	return map[string]bool{
		DefaultToAfterHooks:            false,
		DetectDrift:                    false,
		CorrectDrift:                   false,
		AllowDNSLookups:                false,
		OOMWatch:                       false,
		AdoptLegacyReleases:            false,
		DisableChartDigestTracking:     false,
		UseHelm3Defaults:               false,
		CancelHealthCheckOnNewRevision: false,
		DefaultToRetryOnFailure:        false,
		ObjectLevelWorkloadIdentity:    false,
		RecreateImmutableResources:     false,
		controller.FeatureGateCacheSecretsAndConfigMaps:  false,
		controller.FeatureGateAdditiveCELDependencyCheck: false,
		// Off, as upstream: on, the controller watches ExternalArtifacts,
		// a CRD that not every Flux installation serves.
		controller.FeatureGateExternalArtifact:      false,
		controller.FeatureGateDisableConfigWatchers: false,
		controller.FeatureGateDirectSourceFetch:     false,
	}
}

// Load validates the gates set on the command line against the supported
// set and makes them visible to Enabled. Unknown gates are an error.
func Load(cli *feathelper.FeatureGates) error {
	// No gate of ours or upstream's is retired: every known gate still
	// changes behaviour, and an unknown one is refused.
	return cli.SupportedFeatures(defaults(), nil)
}

// Enabled reports whether a gate is on. Unknown gates report false.
func Enabled(gate string) bool {
	on, err := feathelper.Enabled(gate)
	return err == nil && on
}

// Resolve is the state of every supported gate once the settings of a
// `--feature-gates` value (parsed as the flag parses it) are laid over the
// defaults, refusing an unknown gate as Load does. Unlike Load it leaves
// the process's gates alone: `helm-controller plan` predicts with the
// gates of another process, the controller it previews.
func Resolve(cli map[string]bool) (map[string]bool, error) {
	gates := defaults()
	for gate, on := range cli {
		if _, known := gates[gate]; !known {
			return nil, fmt.Errorf("feature-gate '%s' not supported", gate)
		}
		gates[gate] = on
	}
	return gates, nil
}

// GatesValue is a `--feature-gates` flag value that collects the settings
// into m, with the parser the controller's flag uses (fluxcd/pkg/runtime
// binds the same one): comma separated Gate=bool pairs, and a repeated
// flag adds to the earlier ones.
func GatesValue(m *map[string]bool) pflag.Value {
	return cliflag.NewMapStringBool(m)
}
